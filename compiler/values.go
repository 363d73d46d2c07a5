package compiler

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/flowfabric/ff/compiler/plan"
)

// MaxNameLen is the longest identifier accepted (declarations, execs,
// fields).
const MaxNameLen = plan.MaxNameLen

// parseInt parses an integer literal with optional `_` between digits.
func parseInt(text string) (int64, error) {
	digits := strings.TrimPrefix(text, "-")
	if digits == "" {
		return 0, fmt.Errorf("invalid integer %q", text)
	}
	if strings.Contains(digits, ".") {
		return 0, fmt.Errorf("invalid integer %q: fractions are not allowed", text)
	}
	if digits[0] == '_' || digits[len(digits)-1] == '_' || strings.Contains(digits, "__") {
		return 0, fmt.Errorf("invalid integer %q: `_` may only separate digits", text)
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(text, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid integer %q: out of range", text)
	}
	return v, nil
}

// durationUnits are the accepted units in milliseconds.
var durationUnits = map[string]int64{"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}

// parseDuration parses a duration such as "100ms", "30s" or "1h30m" into
// milliseconds. Components are integers with a unit; `_` may separate
// digits.
func parseDuration(text string) (int64, error) {
	if strings.HasPrefix(text, "-") {
		return 0, fmt.Errorf("invalid duration %q: durations cannot be negative", text)
	}
	if !strings.ContainsAny(text, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		return 0, fmt.Errorf("invalid duration %q: missing unit (ms, s, m or h), e.g. %ss", text, text)
	}
	var total int64
	rest := text
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '_') {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("invalid duration %q: expected a number before %q", text, rest)
		}
		num := rest[:i]
		rest = rest[i:]
		if strings.HasPrefix(rest, ".") {
			return 0, fmt.Errorf("invalid duration %q: fractions are not allowed, use a smaller unit", text)
		}
		j := 0
		for j < len(rest) && (rest[j] < '0' || rest[j] > '9') && rest[j] != '_' {
			j++
		}
		unit := rest[:j]
		rest = rest[j:]
		if unit == "" {
			return 0, fmt.Errorf("invalid duration %q: missing unit after %s (ms, s, m or h)", text, num)
		}
		mult, ok := durationUnits[unit]
		if !ok {
			return 0, fmt.Errorf("invalid duration %q: unknown unit %q (use ms, s, m or h)", text, unit)
		}
		n, err := parseInt(num)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: %s", text, strings.TrimPrefix(err.Error(), fmt.Sprintf("invalid integer %q: ", num)))
		}
		if n > math.MaxInt64/mult || total > math.MaxInt64-n*mult {
			return 0, fmt.Errorf("invalid duration %q: too large", text)
		}
		total += n * mult
	}
	return total, nil
}

// plural formats a count with a noun: "1 upstream", "2 upstreams".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// formatMs formats milliseconds as a duration literal of the language:
// "1s", "1m30s", "250ms", "0ms".
func formatMs(ms int64) string {
	if ms == 0 {
		return "0ms"
	}
	var b strings.Builder
	for _, u := range []struct {
		name string
		ms   int64
	}{{"h", 3_600_000}, {"m", 60_000}, {"s", 1_000}, {"ms", 1}} {
		if n := ms / u.ms; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			ms %= u.ms
		}
	}
	return b.String()
}
