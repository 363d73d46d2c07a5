// Package cron parses schedule expressions and computes their fire times.
//
// An expression is either five cron fields, a macro, or "@every D":
//
//	minute hour day-of-month month day-of-week
//	0-59   0-23 1-31         1-12  0-7 (0 and 7 are Sunday)
//
// Each field is "*", a value, a range "a-b", a step "*/n", "a-b/n" or "a/n"
// (from a to the field's maximum), or a comma list of these. Months may be
// written jan-dec and days of the week sun-sat, in any case. Fields are
// separated by spaces or tabs.
//
// When both day-of-month and day-of-week are restricted (neither is exactly
// "*"), a day matches if either matches; when one of them is "*", only the
// other one applies. This is the POSIX rule: only a field that is exactly "*"
// is unrestricted, and a field such as "*/2" or "*,10" counts as
// restricted. Vixie cron and cronie differ: there any field that starts
// with "*" counts as unrestricted, and then a day must match both fields.
// So "0 0 */2 * mon" fires here at midnight on odd days of the month and on
// Mondays, and there only on Mondays that are odd days of the month.
//
// The macros are @yearly and @annually (0 0 1 1 *), @monthly (0 0 1 * *),
// @weekly (0 0 * * 0), @daily and @midnight (0 0 * * *) and @hourly
// (0 * * * *). "@every D" takes a Go duration (time.ParseDuration) that is a
// whole number of seconds between 1s and 366 days, and fires at every instant
// that is a multiple of D since the Unix epoch, whatever the time zone.
// Macro names are case-insensitive.
//
// # Time zones
//
// Cron fields are matched against the wall clock of the schedule's time
// zone. Fire times depend only on the expression, the zone data and the
// instant passed to Next, so every process computes the same instants.
// Around daylight-saving changes:
//
//   - A wall time that does not exist (it falls in a spring-forward gap) fires
//     at the wall time moved forward by the length of the gap: in New York,
//     02:30 on the day clocks jump from 02:00 to 03:00 fires at 03:30 EDT.
//     When that instant is also a regular fire (02:00 moved to 03:00 for an
//     hourly schedule) it fires once. Next called after the change (at
//     03:10 EDT) still returns the moved fire (03:30 EDT). Moved fires take
//     their place in time among the regular fires after the gap: on Lord
//     Howe Island, where clocks jump from 02:00 to 02:30, "*/7 * * * *"
//     fires at 02:35, 02:37 (02:07 moved), 02:42, 02:44 (02:14 moved) and so
//     on.
//   - A wall time that happens twice (it falls in a fall-back overlap) fires
//     once, at its first occurrence.
package cron

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

const (
	// searchYears is how far ahead Next looks for a fire time.
	searchYears = 5
	// everyMax is the longest interval "@every" accepts.
	everyMax = 366 * 24 * time.Hour
	// zoneProbe is how far either side of a wall time the zone offsets in
	// effect are sampled; it is larger than any UTC offset, so the offsets
	// before and after a nearby transition are both seen.
	zoneProbe = 48 * 60 * 60
)

// Schedule is a parsed schedule expression in a time zone.
type Schedule struct {
	expr string
	loc  *time.Location

	// every is the interval of an "@every" schedule in seconds; when it is
	// set the fields below are unused.
	every int64

	// Bit i of each set is set when value i matches.
	minute, hour, dom, month, dow uint64
	// domStar and dowStar record a day-of-month or day-of-week field that is
	// exactly "*", for the either-or rule between the two.
	domStar, dowStar bool
}

// field describes one of the five cron fields.
type field struct {
	name     string
	min, max int            // allowed values
	starMax  int            // upper end of "*" (day-of-week: 6, as 7 is also Sunday)
	names    map[string]int // three-letter names, lower case
}

var (
	minuteField = field{name: "minute", min: 0, max: 59, starMax: 59}
	hourField   = field{name: "hour", min: 0, max: 23, starMax: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31, starMax: 31}
	monthField  = field{name: "month", min: 1, max: 12, starMax: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}}
	dowField = field{name: "day-of-week", min: 0, max: 7, starMax: 6, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}}
)

// macros maps each macro to its five fields.
var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// Parse parses expr in time zone loc (nil = UTC).
func Parse(expr string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	s := &Schedule{expr: expr, loc: loc}
	fields := splitFields(expr)
	if len(fields) == 0 {
		return nil, errors.New("cron: empty expression")
	}
	if strings.HasPrefix(fields[0], "@") {
		name := strings.ToLower(fields[0])
		if name == "@every" {
			if len(fields) != 2 {
				return nil, errors.New("cron: @every wants one duration, e.g. \"@every 90s\"")
			}
			every, err := parseEvery(fields[1])
			if err != nil {
				return nil, err
			}
			s.every = every
			return s, nil
		}
		body, ok := macros[name]
		if !ok {
			return nil, fmt.Errorf("cron: unknown macro %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every)", fields[0])
		}
		if len(fields) != 1 {
			return nil, fmt.Errorf("cron: %s takes no arguments", fields[0])
		}
		fields = splitFields(body)
	}
	if len(fields) != 5 {
		return nil, fmt.Errorf("cron: want 5 fields (minute hour day-of-month month day-of-week), got %d", len(fields))
	}
	var err error
	if s.minute, err = minuteField.parse(fields[0]); err != nil {
		return nil, err
	}
	if s.hour, err = hourField.parse(fields[1]); err != nil {
		return nil, err
	}
	if s.dom, err = domField.parse(fields[2]); err != nil {
		return nil, err
	}
	if s.month, err = monthField.parse(fields[3]); err != nil {
		return nil, err
	}
	if s.dow, err = dowField.parse(fields[4]); err != nil {
		return nil, err
	}
	if s.dow&(1<<7) != 0 { // 7 is Sunday, like 0
		s.dow = s.dow&^(1<<7) | 1
	}
	s.domStar = fields[2] == "*"
	s.dowStar = fields[4] == "*"
	return s, nil
}

// String returns expr as given.
func (s *Schedule) String() string {
	return s.expr
}

// Location returns the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// splitFields splits expr at runs of spaces and tabs.
func splitFields(expr string) []string {
	return strings.FieldsFunc(expr, func(r rune) bool { return r == ' ' || r == '\t' })
}

// parseEvery parses the duration of "@every" into seconds.
func parseEvery(arg string) (int64, error) {
	d, err := time.ParseDuration(arg)
	if err != nil {
		return 0, fmt.Errorf("cron: @every %s: not a duration: give hours, minutes and seconds, such as 90s, 15m or 36h", arg)
	}
	switch {
	case d < time.Second:
		return 0, fmt.Errorf("cron: @every %s: must be at least 1s", arg)
	case d > everyMax:
		return 0, fmt.Errorf("cron: @every %s: must be at most 366 days (%v)", arg, everyMax)
	case d%time.Second != 0:
		return 0, fmt.Errorf("cron: @every %s: not a whole number of seconds", arg)
	}
	return int64(d / time.Second), nil
}

// parse parses one field into its set of matching values.
func (f field) parse(text string) (uint64, error) {
	var set uint64
	for item := range strings.SplitSeq(text, ",") {
		bitsOf, err := f.parseItem(item)
		if err != nil {
			return 0, fmt.Errorf("cron: %s field %q: %w", f.name, text, err)
		}
		set |= bitsOf
	}
	return set, nil
}

// parseItem parses one item of a comma list: "*", "a", "a-b", each with an
// optional "/step".
func (f field) parseItem(item string) (uint64, error) {
	if item == "" {
		return 0, errors.New("empty list item")
	}
	rng, stepText, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		if strings.Contains(stepText, "/") {
			return 0, fmt.Errorf("%q has more than one '/'", item)
		}
		if stepText == "" {
			return 0, fmt.Errorf("%q is missing its step", item)
		}
		n, ok := parseNumber(stepText)
		if !ok {
			return 0, fmt.Errorf("step %q is not a number", stepText)
		}
		if n < 1 || n > f.max {
			return 0, fmt.Errorf("step %s is outside 1-%d", stepText, f.max)
		}
		step = n
	}
	var lo, hi int
	switch {
	case rng == "":
		return 0, fmt.Errorf("%q is missing its value", item)
	case rng == "*":
		lo, hi = f.min, f.starMax
	default:
		loText, hiText, isRange := strings.Cut(rng, "-")
		if loText == "" {
			return 0, fmt.Errorf("range %q is missing its start", rng)
		}
		var err error
		if lo, err = f.value(loText); err != nil {
			return 0, err
		}
		switch {
		case isRange:
			if hiText == "" {
				return 0, fmt.Errorf("range %q is missing its end", rng)
			}
			if strings.Contains(hiText, "-") {
				return 0, fmt.Errorf("range %q has more than one '-'", rng)
			}
			if hi, err = f.value(hiText); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("range %q is empty (%d > %d)", rng, lo, hi)
			}
		case hasStep: // "a/n" runs from a to the field's maximum
			hi = f.max
		default:
			hi = lo
		}
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << v
	}
	return set, nil
}

// value parses a number or a name of the field and checks its bounds.
func (f field) value(text string) (int, error) {
	if v, ok := f.names[strings.ToLower(text)]; ok {
		return v, nil
	}
	n, ok := parseNumber(text)
	if !ok {
		if f.names != nil {
			return 0, fmt.Errorf("%q is not a number or a %s name", text, f.name)
		}
		return 0, fmt.Errorf("%q is not a number", text)
	}
	if n < f.min || n > f.max {
		return 0, fmt.Errorf("%s is outside %d-%d", text, f.min, f.max)
	}
	return n, nil
}

// parseNumber parses a non-empty string of ASCII digits. Values too large
// for any field come back as math.MaxInt, so that they fail the bounds check.
func parseNumber(text string) (int, bool) {
	if text == "" {
		return 0, false
	}
	for _, c := range []byte(text) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(text)
	if err != nil { // only a range error is possible here
		return math.MaxInt, true
	}
	return n, true
}

// Next returns the first fire time strictly after t (in the schedule's zone), or the zero Time when there is none within 5 years (e.g. "0 0 30 2 *").
func (s *Schedule) Next(t time.Time) time.Time {
	if s.every > 0 {
		return s.nextEvery(t)
	}
	return s.nextCron(t)
}

// nextEvery returns the first multiple of the interval since the Unix epoch
// that is strictly after t.
func (s *Schedule) nextEvery(t time.Time) time.Time {
	sec := t.Unix() // rounded down: t is in [sec, sec+1s)
	q := sec / s.every
	if sec%s.every < 0 {
		q-- // round toward minus infinity
	}
	if q >= math.MaxInt64/s.every-1 {
		return time.Time{}
	}
	return time.Unix((q+1)*s.every, 0).In(s.loc)
}

// nextCron walks the wall clock of the schedule's zone from the minute after
// t, skipping whole months, days and hours that cannot match.
//
// Fire instants grow with wall times except across a spring-forward gap:
// the wall times in the gap fire moved forward by its length, at the same
// instants as the real wall times that follow the gap. So a fire found in a
// gap is only a candidate, and the walk goes on up to its wall time (moved
// forward) for an earlier real fire.
func (s *Schedule) nextCron(t time.Time) time.Time {
	local := t.In(s.loc)
	limit := local.AddDate(searchYears, 0, 0)
	endYear := limit.Year()
	// Wall times are walked as UTC times, from the first whole minute after
	// the wall time of t, or after the wall time of t less the gap when t
	// is within a gap's length after a spring-forward: the wall times in the
	// gap fire up to that long after the change.
	after := wallOf(local).Truncate(time.Minute).Add(time.Minute)
	start := after.Add(-time.Duration(recentGap(t, s.loc)) * time.Second)
	year, mon, day := start.Date()
	month := int(mon)
	hour, minute, _ := start.Clock()
	// best is the earliest fire after t found so far in a gap, and
	// bestWall its wall time; the zero Time when there is none.
	var best, bestWall time.Time
	for year <= endYear {
		// Carry overflows upward; each unit grew by at most one.
		if minute > 59 {
			minute = 0
			hour++
		}
		if hour > 23 {
			hour = 0
			day++
		}
		if day > daysIn(year, month) {
			day = 1
			month++
		}
		if month > 12 {
			year, month, day, hour, minute = year+1, 1, 1, 0, 0
			continue
		}

		m := nextBit(s.month, month)
		if m < 0 {
			year, month, day, hour, minute = year+1, 1, 1, 0, 0
			continue
		}
		if m != month {
			month, day, hour, minute = m, 1, 0, 0
		}
		if !s.dayMatches(year, month, day) {
			day, hour, minute = day+1, 0, 0
			continue
		}
		h := nextBit(s.hour, hour)
		if h < 0 {
			day, hour, minute = day+1, 0, 0
			continue
		}
		if h != hour {
			hour, minute = h, 0
		}
		mi := nextBit(s.minute, minute)
		if mi < 0 {
			hour, minute = hour+1, 0
			continue
		}
		minute = mi

		wall := time.Date(year, time.Month(month), day, hour, minute, 0, 0, time.UTC)
		if !best.IsZero() && !wall.Before(bestWall) {
			break // this wall time and all later ones fire after best
		}
		fire, moved := wallInstant(wall, s.loc)
		// A fire not after t has fired already: the first occurrence of
		// this wall time (before a fall-back), or a wall time of a gap
		// moved forward to t or before.
		if fire.After(t) && (best.IsZero() || fire.Before(best)) {
			best = fire
			if !moved {
				break // a real wall time: later ones fire later
			}
			bestWall = wallOf(fire)
			// The wall times left in the gap fire later than this one,
			// and the real ones up to the wall time of t fire at t or
			// before: go on from the end of the gap or after t.
			if end, ok := gapEnd(wall, fire); ok {
				if end.Before(after) {
					end = after
				}
				year, mon, day = end.Date()
				month = int(mon)
				hour, minute, _ = end.Clock()
				continue
			}
		}
		minute++
	}
	if best.After(limit) {
		return time.Time{}
	}
	return best
}

// wallOf returns the wall-clock time of t as a UTC time.
func wallOf(t time.Time) time.Time {
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	return time.Date(year, month, day, hour, minute, sec, t.Nanosecond(), time.UTC)
}

// recentGap returns the length in seconds of the gap in loc's wall clock
// when its spring-forward change happened in the gap's length up to t,
// and 0 otherwise.
func recentGap(t time.Time, loc *time.Location) int64 {
	_, now := t.In(loc).Zone()
	_, before := t.Add(-zoneProbe * time.Second).In(loc).Zone()
	if before >= now {
		return 0
	}
	gap := int64(now - before)
	if _, off := t.Add(-time.Duration(gap) * time.Second).In(loc).Zone(); off == now {
		return 0 // the change was longer ago than the gap
	}
	return gap
}

// gapEnd returns where the gap that holds wall ends, as a whole minute of
// wall time (a UTC time), given fire, the instant wall was moved to. It
// finds the change of offset that made the gap as the start of the zone in
// effect at fire; ok is false when the change found is not that one, or
// when the minute is not after wall.
func gapEnd(wall, fire time.Time) (end time.Time, ok bool) {
	change, _ := fire.ZoneBounds()
	if change.IsZero() {
		return time.Time{}, false
	}
	_, before := change.Add(-time.Second).Zone()
	if wall.Unix()-fire.Unix() != int64(before) {
		return time.Time{}, false // fire was not moved by this change
	}
	end = wallOf(change).Truncate(time.Minute)
	return end, end.After(wall)
}

// dayMatches applies the day-of-month and day-of-week fields to a date.
func (s *Schedule) dayMatches(year, month, day int) bool {
	domOK := s.dom&(1<<day) != 0
	if s.dowStar {
		return domOK
	}
	wd := time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC).Weekday()
	dowOK := s.dow&(1<<wd) != 0
	if s.domStar {
		return dowOK
	}
	return domOK || dowOK
}

// wallInstant returns the instant at which a wall time of loc, given as a
// UTC time, fires: its first occurrence when it happens twice, and the wall
// time moved forward by the gap when it falls in a gap, which moved reports.
// Unlike time.Date, whose choice in these cases is unspecified, the result
// is fixed by the zone data.
func wallInstant(wallTime time.Time, loc *time.Location) (fire time.Time, moved bool) {
	wall := wallTime.Unix()
	best, valid := int64(0), false
	minOffset := int64(math.MaxInt64)
	for _, probe := range [3]int64{wall - zoneProbe, wall, wall + zoneProbe} {
		_, off := time.Unix(probe, 0).In(loc).Zone()
		offset := int64(off)
		minOffset = min(minOffset, offset)
		u := wall - offset
		if _, got := time.Unix(u, 0).In(loc).Zone(); int64(got) != offset {
			continue // offset is not in effect at u: no occurrence with it
		}
		if !valid || u < best {
			best, valid = u, true
		}
	}
	if !valid {
		// In a gap: read the wall time with the offset from before the
		// gap (the smaller one), which lands the gap's length later.
		best = wall - minOffset
	}
	return time.Unix(best, 0).In(loc), !valid
}

// daysIn returns the number of days in a month.
func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// nextBit returns the smallest value at least from whose bit is set, or -1.
func nextBit(set uint64, from int) int {
	if from > 63 {
		return -1
	}
	rest := set >> from << from
	if rest == 0 {
		return -1
	}
	return bits.TrailingZeros64(rest)
}
