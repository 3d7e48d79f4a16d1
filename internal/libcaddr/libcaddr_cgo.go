//go:build cgo

package libcaddr

/*
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int graylb_inet_aton(const char *s, unsigned char out[4]) {
	struct in_addr a;
	if (!inet_aton(s, &a)) {
		return 0;
	}
	memcpy(out, &a.s_addr, 4);
	return 1;
}

static int graylb_getaddrinfo4(const char *s, unsigned char out[4]) {
	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_INET;
	hints.ai_flags = AI_NUMERICHOST;
	if (getaddrinfo(s, NULL, &hints, &res) != 0 || res == NULL) {
		return 0;
	}
	memcpy(out, &((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr, 4);
	freeaddrinfo(res);
	return 1;
}
*/
import "C"

import (
	"strings"
	"unsafe"
)

// Available reports whether the readings call the C library (built with
// cgo).
const Available = true

// InetAton returns the address inet_aton(3) reads s as, in network order,
// and whether it reads one. A string holding a NUL byte, which C would
// read only up to, reads as none.
func InetAton(s string) (a [4]byte, ok bool) {
	return read(s, func(cs *C.char, out *C.uchar) C.int { return C.graylb_inet_aton(cs, out) })
}

// GetaddrinfoNumeric returns the IPv4 address getaddrinfo(3) gives s as a
// numeric host (AF_INET, AI_NUMERICHOST: no lookup), as Go's cgo resolver
// asks the C library before it looks a name up, and whether it gives one.
// A string holding a NUL byte reads as none.
func GetaddrinfoNumeric(s string) (a [4]byte, ok bool) {
	return read(s, func(cs *C.char, out *C.uchar) C.int { return C.graylb_getaddrinfo4(cs, out) })
}

func read(s string, f func(*C.char, *C.uchar) C.int) (a [4]byte, ok bool) {
	if strings.IndexByte(s, 0) >= 0 {
		return a, false
	}
	cs := C.CString(s)
	defer C.free(unsafe.Pointer(cs))
	var out [4]byte // Go memory without pointers: C may write it
	if f(cs, (*C.uchar)(unsafe.Pointer(&out[0]))) == 0 {
		return a, false
	}
	return out, true
}
