// Package jsonscan finds members of a JSON object in its text without
// decoding or validating it: the stage route cuts a run's plan out of its
// body this way, and the client reads a plan's name. Callers must validate
// what they use, or know it valid. LineCol says where in a JSON text a
// syntax error is, for messages.
package jsonscan

import (
	"bytes"
	"unicode/utf8"
)

// Member returns where the value of the first member of the JSON object
// data whose key is written exactly as key (no escapes) starts and ends.
// Only the object's own members count, not those of nested values. It
// reports false when there is no such member, or when data is not an
// object as far as it reads.
func Member(data []byte, key string) (start, end int, ok bool) {
	i := SkipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return 0, 0, false
	}
	i++
	for {
		i = SkipSpace(data, i)
		if i < len(data) && data[i] == ',' {
			i = SkipSpace(data, i+1)
		}
		if i == len(data) || data[i] != '"' {
			return 0, 0, false
		}
		k := StringEnd(data, i)
		if k < 0 {
			return 0, 0, false
		}
		name := data[i+1 : k-1]
		i = SkipSpace(data, k)
		if i == len(data) || data[i] != ':' {
			return 0, 0, false
		}
		i = SkipSpace(data, i+1)
		j := valueEnd(data, i)
		if j < 0 {
			return 0, 0, false
		}
		if string(name) == key {
			return i, j, true
		}
		i = j
	}
}

// SkipSpace returns the index of the first byte of data from i on that is
// not JSON white space, or len(data).
func SkipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// StringEnd returns the index after the string that starts with the quote
// at data[i], or -1 when it does not end.
func StringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd returns the index after the JSON value that starts at data[i],
// or -1 when it does not end: objects and arrays end with their matching
// bracket (brackets in strings do not count), strings with their closing
// quote, other values before the next delimiter or space.
func valueEnd(data []byte, i int) int {
	if i == len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return StringEnd(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				e := StringEnd(data, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	for j := i; j < len(data); j++ {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(data)
}

// LineCol returns the line and column, both from 1 and the column in
// characters, of the byte at offset in data (as encoding/json's
// SyntaxError.Offset gives it: the bytes read when the error was found),
// for messages that say where a JSON text goes wrong. An offset past the
// end is the end.
func LineCol(data []byte, offset int64) (line, col int) {
	before := data[:max(0, min(int(offset), len(data)))]
	line = bytes.Count(before, []byte("\n")) + 1
	col = utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return line, col
}
