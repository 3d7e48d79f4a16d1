// Package libcaddr reads a host name as the C library reads a numeric
// IPv4 address, for tests that hold graylb's own reading (which is pure
// Go) to it. It calls the C library through cgo; built without cgo,
// Available is false and every reading reports none.
//
// Import it from tests only: graylb's own code uses no cgo.
package libcaddr
