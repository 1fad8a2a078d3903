package checksumref

import "testing"

func TestCRC32cKnownValue(t *testing.T) {
	// RFC 3720 B.4: 32 bytes of zeros.
	if got := CRC32c(make([]byte, 32)); got != 0x8a9136aa {
		t.Fatalf("CRC32c of 32 zero bytes = %#x, want 0x8a9136aa", got)
	}
}
