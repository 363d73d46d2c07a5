package bodyread

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestAll(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 100)
	for _, tc := range []struct {
		name string
		size int64
	}{
		{"announced", int64(len(body))},
		{"unknown", -1},
		{"zero", 0},
		{"shorter than announced", int64(len(body)) + 500},
		{"longer than announced", 10},
		{"too large to presize", maxPresize + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{bytes.NewReader(body), iotest.OneByteReader(bytes.NewReader(body)), iotest.DataErrReader(bytes.NewReader(body))} {
				got, err := All(r, tc.size)
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("All = %d bytes, %v; want the %d-byte body", len(got), err, len(body))
				}
			}
		})
	}
	boom := errors.New("boom")
	if _, err := All(iotest.ErrReader(boom), 10); !errors.Is(err, boom) {
		t.Fatalf("All of a failing reader = %v, want its error", err)
	}
}

func TestAllAllocatesOnceWhenAnnounced(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 3000)
	r := bytes.NewReader(body)
	n := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		if _, err := All(r, int64(len(body))); err != nil {
			t.Fatal(err)
		}
	})
	if n != 1 {
		t.Fatalf("%v allocations per read, want 1", n)
	}
}
