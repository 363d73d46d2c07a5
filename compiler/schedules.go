package compiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/runtime/cron"
	"github.com/flowfabric/ff/runtime/flowinput"
)

// scheduleSample is the fire time at which a schedule's input is checked
// with its placeholders filled in: any instant does, since a placeholder
// becomes a string whatever the time, and a fixed one keeps compiling
// deterministic.
var scheduleSample = time.Date(2026, time.January, 1, 2, 0, 0, 0, time.UTC)

// checkSchedule compiles a schedule declaration against the compiled flows
// of the package. clean holds the flows that compiled without errors: the
// input of a schedule of any other flow is not checked, since its type may
// be what is wrong.
func (c *checker) checkSchedule(sd *dsl.ScheduleDecl, flows map[string]*plan.Flow, clean map[string]bool) (plan.Schedule, bool) {
	s := plan.Schedule{Name: sd.Name.Name}
	ok := true
	seen := c.newSeen()
	var (
		flowID           *dsl.Ident
		cronLit, zoneLit *dsl.StringLit
		input            *dsl.Value
		inputItem        *dsl.ScheduleItem
		loc              = time.UTC
		zoneOK           = true
		flowKnown        bool
	)
	for _, it := range sd.Items {
		if !seen.first(it.Keyword(), it.Range(), "schedule") {
			ok = false
			continue
		}
		switch {
		case it.Flow != nil:
			flowID = it.Flow
		case it.Cron != nil:
			cronLit = it.Cron
		case it.Timezone != nil:
			zoneLit = it.Timezone
		case it.Input != nil:
			input, inputItem = it.Input, it
		}
	}
	if flowID == nil {
		c.diags.Errorf(sd.Name.Range(), dsl.CodeMissingItem, "schedule %q names no flow: add `flow NAME`", s.Name)
		ok = false
	} else {
		s.Flow = flowID.Name
		prev, declared := c.names[flowID.Name]
		flowKnown = declared && prev.kind == kindFlow
		if flowKnown && len(flowID.Name) > plan.MaxScheduleNameLen {
			c.diags.Errorf(flowID.Range(), dsl.CodeBadName, "flow name %q is %d bytes long; a scheduled flow's name may be at most %d", flowID.Name, len(flowID.Name), plan.MaxScheduleNameLen)
			ok = false
		}
		if !flowKnown {
			what := ""
			if declared {
				what = fmt.Sprintf(" (%q is a %s)", flowID.Name, prev.kind)
			}
			c.unknown(flowID, dsl.CodeUnknownFlow, "flow", c.flowNames(), what) // silent for a broken flow
			ok = false
		}
	}
	if zoneLit != nil {
		s.Timezone = zoneLit.Value()
		if !zoneLit.Valid() {
			zoneOK, ok = false, false // reported by the parser
		} else if l, err := cron.Zone(s.Timezone); err != nil {
			c.diags.Errorf(zoneLit.Range(), dsl.CodeTimezone, "timezone %v", err)
			zoneOK, ok = false, false
		} else {
			loc = l
		}
	}
	if cronLit == nil {
		c.diags.Errorf(sd.Name.Range(), dsl.CodeMissingItem, "schedule %q has no cron expression: add `cron \"0 2 * * *\"` (five fields, @hourly ... or @every D)", s.Name)
		ok = false
	} else {
		s.Cron = strings.TrimSpace(cronLit.Value())
		switch {
		case !cronLit.Valid():
			ok = false
		case s.Cron == "":
			c.diags.Errorf(cronLit.Range(), dsl.CodeCron, "cron expression is empty: write one such as \"0 2 * * *\", \"@hourly\" or \"@every 15m\"")
			ok = false
		case len(s.Cron) > cronMaxLen:
			c.diags.Errorf(cronLit.Range(), dsl.CodeCron, "cron expression is %d bytes, the limit is %d", len(s.Cron), cronMaxLen)
			ok = false
		default:
			if sched, err := cron.Parse(s.Cron, loc); err != nil {
				c.diags.Errorf(cronLit.Range(), dsl.CodeCron, "invalid cron expression: %s", strings.TrimPrefix(err.Error(), "cron: "))
				ok = false
			} else if sched.Next(scheduleSample.In(loc)).IsZero() {
				// As the API refuses it: a schedule that would never start a run.
				c.diags.Errorf(cronLit.Range(), dsl.CodeCron, "cron expression %q never fires (no matching day within five years)", s.Cron)
				ok = false
			}
		}
	}
	if input != nil {
		raw, pos, vok := c.scheduleValue(input)
		if vok {
			s.Input = raw
		} else {
			ok = false
		}
		f := flows[s.Flow]
		switch {
		case !flowKnown || !clean[s.Flow] || f == nil || c.typesBroken || c.inputUnresolved[s.Flow]:
			// The flow's types are in doubt: its errors are reported.
		case f.Input == nil:
			c.diags.Errorf(inputItem.Range(), dsl.CodeScheduleInput, "flow %q takes no input: remove `input` from schedule %q", s.Flow, s.Name)
			ok = false
		case vok && zoneOK:
			if !c.checkScheduleInput(s, f, loc, pos, input) {
				ok = false
			}
		}
	} else if f := flows[s.Flow]; flowKnown && f != nil && f.Input != nil {
		c.diags.Errorf(sd.Name.Range(), dsl.CodeScheduleInput, "flow %q takes %s: add `input VALUE` to schedule %q", s.Flow, plan.TypeString(f.Input), s.Name)
		ok = false
	}
	return s, ok
}

// cronMaxLen is the longest cron expression the API accepts.
const cronMaxLen = 256

// flowNames returns the names of the declared flows, for suggestions.
func (c *checker) flowNames() []string {
	var names []string
	for name, d := range c.names {
		if d.kind == kindFlow {
			names = append(names, name)
		}
	}
	return names
}

// checkScheduleInput checks a schedule's input (raw JSON) against its
// flow's input type with the validator the API uses, after filling in its
// placeholders for a sample fire as the API does. Every mismatch, up to
// maxScheduleInputErrors, is reported at the value the path in its error
// names (at the key, for an unknown field), or at the nearest enclosing
// one.
func (c *checker) checkScheduleInput(s plan.Schedule, f *plan.Flow, loc *time.Location, pos valuePositions, v *dsl.Value) bool {
	filled, err := cron.FillInput(s.Input, scheduleSample.In(loc))
	if err != nil {
		c.diags.Errorf(v.Range(), dsl.CodeScheduleInput, "input: %v", err)
		return false
	}
	// As the API: the size with the placeholders filled in where a time
	// is written longest (an offset such as +01:00, not Z).
	longest, err := cron.FillInput(s.Input, scheduleSample.In(time.FixedZone("", 3600)))
	if err != nil {
		c.diags.Errorf(v.Range(), dsl.CodeScheduleInput, "input: %v", err)
		return false
	}
	if n := max(len(filled), len(longest)); n > plan.MaxPayloadBytes {
		c.diags.Errorf(v.Range(), dsl.CodeScheduleInput, "input of schedule %q is %d bytes with its placeholders filled in; the limit is %d", s.Name, n, plan.MaxPayloadBytes)
		return false
	}
	errs, more := flowinput.FlowErrors(f, "input", filled, maxScheduleInputErrors)
	for _, fe := range errs {
		segs, _ := splitPath(fe.Path) // a prefix when it cannot be read whole
		at := pos.values
		if strings.HasPrefix(fe.Msg, "unknown field") {
			at = pos.keys // the field is what is wrong, not its value
		}
		r, ok := at[pathKey(segs)]
		for ; !ok && len(segs) > 0; segs = segs[:len(segs)-1] {
			r, ok = pos.values[pathKey(segs[:len(segs)-1])]
		}
		if !ok {
			r = v.Range()
		}
		c.diags.Errorf(r, dsl.CodeScheduleInput, "input of schedule %q does not fit flow %q: %s: %s", s.Name, s.Flow, fe.Path, fe.Msg)
	}
	if more {
		c.diags.Errorf(v.Range(), dsl.CodeScheduleInput, "input of schedule %q has more mismatches with flow %q than the %d reported", s.Name, s.Flow, maxScheduleInputErrors)
	}
	return len(errs) == 0
}

// maxScheduleInputErrors is how many mismatches of one schedule's input
// with its flow's input type are reported.
const maxScheduleInputErrors = 20

// splitPath splits a flowinput path below its root into its steps: a
// record field (".name"; field names are identifiers), a list index
// ("[2]") or a map key (`["k"]`, quoted as Go quotes). It returns the
// steps it could read and whether it read the whole path.
func splitPath(p string) ([]string, bool) {
	i := strings.IndexAny(p, ".[")
	if i < 0 {
		return nil, true
	}
	var segs []string
	for rest := p[i:]; rest != ""; {
		switch rest[0] {
		case '.':
			n := 1
			for n < len(rest) && rest[n] != '.' && rest[n] != '[' {
				n++
			}
			segs, rest = append(segs, rest[1:n]), rest[n:]
		case '[':
			if strings.HasPrefix(rest, `["`) {
				q, err := strconv.QuotedPrefix(rest[1:])
				if err != nil || !strings.HasPrefix(rest[1+len(q):], "]") {
					return segs, false
				}
				k, _ := strconv.Unquote(q)
				segs, rest = append(segs, k), rest[len(q)+2:]
				continue
			}
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return segs, false
			}
			segs, rest = append(segs, rest[1:end]), rest[end+1:]
		default:
			return segs, false
		}
	}
	return segs, true
}

// pathKey is the key of a value's steps in valuePositions: an object
// member's step is its key, a list element's its index in decimal (one
// value is either, so they do not clash).
func pathKey(segs []string) string { return strings.Join(segs, "\x00") }

// scheduleValue encodes an input literal as JSON and maps the steps to
// each value in it (pathKey) to its range, and to each object member's
// key. A duration becomes integer nanoseconds, as a Go time.Duration
// encodes.
func (c *checker) scheduleValue(v *dsl.Value) (json.RawMessage, valuePositions, bool) {
	var b bytes.Buffer
	pos := valuePositions{values: map[string]dsl.Range{}, keys: map[string]dsl.Range{}}
	ok := c.encodeValue(&b, v, nil, pos)
	return json.RawMessage(b.Bytes()), pos, ok
}

// valuePositions maps the steps to an input's values to their ranges, and
// the steps to its object members to the ranges of their keys.
type valuePositions struct {
	values, keys map[string]dsl.Range
}

func (c *checker) encodeValue(b *bytes.Buffer, v *dsl.Value, segs []string, pos valuePositions) bool {
	pos.values[pathKey(segs)] = v.Range()
	switch {
	case v.Object != nil:
		b.WriteByte('{')
		ok := true
		keys := map[string]dsl.Range{}
		for i, m := range v.Object.Members {
			k := m.Key()
			if m.Quoted != nil && !m.Quoted.Valid() {
				ok = false // reported by the parser
			} else if !utf8.ValidString(k) {
				c.diags.Errorf(m.KeyRange(), dsl.CodeScheduleInput, "key holds bytes that are not UTF-8 (an \\x escape): JSON cannot carry them")
				ok = false
			}
			if prev, dup := keys[k]; dup {
				c.diags.Errorf(m.KeyRange(), dsl.CodeScheduleInput, "field %q is given twice in this object", k).With(prev, "first given here")
				ok = false
				continue
			}
			keys[k] = m.KeyRange()
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			sub := append(segs[:len(segs):len(segs)], k)
			if !c.encodeValue(b, m.Value, sub, pos) {
				ok = false
			}
			pos.keys[pathKey(sub)] = m.KeyRange()
		}
		b.WriteByte('}')
		return ok
	case v.List != nil:
		b.WriteByte('[')
		ok := true
		for i, e := range v.List.Items {
			if i > 0 {
				b.WriteByte(',')
			}
			if !c.encodeValue(b, e, append(segs[:len(segs):len(segs)], strconv.Itoa(i)), pos) {
				ok = false
			}
		}
		b.WriteByte(']')
		return ok
	case v.String != nil:
		if v.String.Valid() && !utf8.ValidString(v.String.Value()) {
			c.diags.Errorf(v.String.Range(), dsl.CodeScheduleInput, "string holds bytes that are not UTF-8 (an \\x escape): JSON cannot carry them")
			return false
		}
		writeJSONString(b, v.String.Value())
		if u := cron.UnknownPlaceholders(v.String.Value()); len(u) > 0 {
			c.diags.Warnf(v.String.Range(), dsl.CodePlaceholder, "%s is not a placeholder and is passed as written (placeholders: %s, %s, %s, %s)",
				strings.Join(u, ", "), cron.PlaceholderFireTime, cron.PlaceholderFireDate, "{{fire_date-N}}", "{{fire_date+N}}")
		}
		return v.String.Valid()
	case v.Int != nil:
		n, ok := c.intValue(v.Int)
		b.WriteString(strconv.FormatInt(n, 10))
		return ok
	case v.Duration != nil:
		ms, ok := c.durationValue(v.Duration, "duration", false)
		if ok && ms > math.MaxInt64/int64(time.Millisecond) {
			c.diags.Errorf(v.Duration.Range(), dsl.CodeBadDuration, "invalid duration %q: too large for a duration field (at most about 292 years)", v.Duration.Text)
			ok = false
		}
		b.WriteString(strconv.FormatInt(ms*int64(time.Millisecond), 10))
		return ok
	case v.Word != nil:
		switch w := v.Word.Name; w {
		case "true", "false", "null":
			b.WriteString(w)
			return true
		default:
			msg := fmt.Sprintf("unknown value %q: a value is a string in quotes, an integer, a duration, true, false, null, a list [...] or an object {...}", w)
			if s := dsl.Suggest(w, []string{"true", "false", "null"}); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			c.diags.Errorf(v.Word.Range(), dsl.CodeScheduleInput, "%s", msg)
			b.WriteString("null")
			return false
		}
	}
	b.WriteString("null")
	return false
}

// writeJSONString writes s as a JSON string, without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // the newline Encode adds
}
