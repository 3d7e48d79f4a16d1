package libcaddr

import "testing"

func TestReadings(t *testing.T) {
	if !Available {
		t.Skip("built without cgo")
	}
	for _, tc := range []struct {
		s         string
		aton, gai bool
		want      [4]byte
	}{
		{"127.0.0.1", true, true, [4]byte{127, 0, 0, 1}},
		{"0x7f000001", true, true, [4]byte{127, 0, 0, 1}},
		{"0x7f.0.0.0x1", true, true, [4]byte{127, 0, 0, 1}},
		{"127.1 trailing", true, false, [4]byte{127, 0, 0, 1}},
		{"localhost", false, false, [4]byte{}},
		{"1.2.3.4\x00", false, false, [4]byte{}},
	} {
		a, ok := InetAton(tc.s)
		if ok != tc.aton || ok && a != tc.want {
			t.Errorf("InetAton(%q) = %v, %v", tc.s, a, ok)
		}
		a, ok = GetaddrinfoNumeric(tc.s)
		if ok != tc.gai || ok && a != tc.want {
			t.Errorf("GetaddrinfoNumeric(%q) = %v, %v", tc.s, a, ok)
		}
	}
}
