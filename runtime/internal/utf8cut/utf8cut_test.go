package utf8cut

import (
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 2, "ab"},
		{"abc", 0, ""},
		{"aé", 2, "a"},  // byte 2 is inside the é
		{"aé", 3, "aé"}, // the whole string
		{"日本", 4, "日"},
		{"a🚀b", 4, "a"},
		{"a\xffb", 2, "a\xff"}, // a stray byte elsewhere is kept as is
	} {
		got := Cut(c.s, c.n)
		if got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
		if utf8.ValidString(c.s) && !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q: not valid UTF-8", c.s, c.n, got)
		}
	}
}
