// Package bodyread reads HTTP bodies whose length is announced in one
// allocation: io.ReadAll starts at 512 bytes and grows, which costs a
// few allocations and copies for every request and answer of the worker
// protocol.
package bodyread

import "io"

// maxPresize bounds the buffer allocated up front from an announced
// length; longer bodies grow as they arrive.
const maxPresize = 1 << 20

// All reads r to its end. size is the announced length (Content-Length;
// -1 or 0 when unknown), used only to size the buffer: a body longer or
// shorter than announced is read as it is.
func All(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 || size > maxPresize {
		return io.ReadAll(r)
	}
	// One byte more than announced, so that the read that finds the end
	// needs no room of its own.
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}
