package cron

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Zone loads the IANA time zone of a schedule ("" = UTC), for the API's
// checks, the compiler's and the runner's fires alike. "Local" is refused:
// it is each host's own zone, so processes on hosts set differently would
// fire the same schedule at different times.
func Zone(tz string) (*time.Location, error) {
	switch tz {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`"Local" is each host's own zone: name one (such as Europe/Berlin or UTC)`)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%q is not a time zone name (IANA names, which are case-sensitive: such as Europe/Berlin or UTC)", tz)
	}
	return loc, nil
}

// The placeholders a schedule's input may hold in its string values,
// filled in at each fire with the fire's time in the schedule's zone.
// {{fire_date-N}} and {{fire_date+N}} are the date N days before or after
// the fire's ({{fire_date-1}}: the day a nightly job at 02:00 works on).
const (
	PlaceholderFireTime = "{{fire_time}}" // RFC 3339, such as 2026-11-23T02:00:00+01:00
	PlaceholderFireDate = "{{fire_date}}" // such as 2026-11-23
)

// placeholderLike matches what a placeholder looks like.
var placeholderLike = regexp.MustCompile(`\{\{[^{}]*\}\}`)

// UnknownPlaceholders returns what in s looks like a placeholder
// ("{{...}}") but is none FillInput fills, such as "{{fire_dat}}": it is
// passed as written, which is what a template meant for the run's handler
// needs, but more often a typo.
func UnknownPlaceholders(s string) []string {
	var out []string
	for _, m := range placeholderLike.FindAllString(s, -1) {
		if m != PlaceholderFireTime && !fireDateWhole.MatchString(m) {
			out = append(out, m)
		}
	}
	return out
}

// fireDateWhole is fireDate alone.
var fireDateWhole = regexp.MustCompile(`^\{\{fire_date(?:[+-]\d{1,4})?\}\}$`)

// fireDate matches {{fire_date}} with an optional offset in days.
var fireDate = regexp.MustCompile(`\{\{fire_date(?:([+-])(\d{1,4}))?\}\}`)

// FillInput returns a schedule's input for the fire at fire (in the
// schedule's zone): every string value, as decoded, has its placeholders
// replaced ("s3://logs/{{fire_date}}/" becomes "s3://logs/2026-11-23/");
// object keys, numbers and the rest keep their values. An input with a
// placeholder is encoded anew (object keys sorted, no HTML escaping); one
// without is returned as it is.
func FillInput(input []byte, fire time.Time) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	fireTime := fire.Format(time.RFC3339)
	date := func(m string) string {
		sm := fireDate.FindStringSubmatch(m)
		n, _ := strconv.Atoi(sm[2]) // at most 4 digits: "" is 0
		if sm[1] == "-" {
			n = -n
		}
		return fire.AddDate(0, 0, n).Format(time.DateOnly)
	}
	filled := false
	var fill func(any) any
	fill = func(v any) any {
		switch x := v.(type) {
		case string:
			y := fireDate.ReplaceAllStringFunc(strings.ReplaceAll(x, PlaceholderFireTime, fireTime), date)
			if y != x {
				filled = true
				return y
			}
		case []any:
			for i := range x {
				x[i] = fill(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = fill(x[k])
			}
		}
		return v
	}
	v = fill(v)
	if !filled {
		return input, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
