// Package utf8cut shortens text to a byte limit without cutting a UTF-8
// character in two, for the console's and ffrun's clipped texts (errors,
// reasons, JSON shown in part).
package utf8cut

import "unicode/utf8"

// Cut returns s cut to at most n bytes, not inside a character: it backs
// off over at most the continuation bytes of the last one (a byte that is
// not UTF-8 elsewhere in s does not shorten it further).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return s[:n]
}
