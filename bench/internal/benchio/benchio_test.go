package benchio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestPcapRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p")
	in := [][]byte{bytes.Repeat([]byte{7}, 60), {1, 2, 3}, {}}
	if err := WritePcap(p, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadPcap(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d frames back, want %d", len(out), len(in))
	}
	for i := range in {
		if !bytes.Equal(in[i], out[i]) {
			t.Fatalf("frame %d: %x, want %x", i, out[i], in[i])
		}
	}
	if _, err := ReadPcap(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("no error for a missing file")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(c.v); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

func FuzzParsePcap(f *testing.F) {
	p := filepath.Join(f.TempDir(), "p")
	if err := WritePcap(p, [][]byte{bytes.Repeat([]byte{9}, 60), {1, 2, 3}}); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(p)
	f.Add(seed)
	f.Add(seed[:30])
	f.Fuzz(func(t *testing.T, b []byte) {
		frames, err := ParsePcap("fuzz", b)
		if err != nil {
			return
		}
		// What was read writes back to the same records.
		q := filepath.Join(t.TempDir(), "q")
		if err := WritePcap(q, frames); err != nil {
			t.Fatal(err)
		}
		again, err := ReadPcap(q)
		if err != nil || len(again) != len(frames) {
			t.Fatalf("rewrite: %d frames, %v (had %d)", len(again), err, len(frames))
		}
		for i := range frames {
			if !bytes.Equal(frames[i], again[i]) {
				t.Fatalf("frame %d differs after rewrite", i)
			}
		}
	})
}
