package ffc

import (
	"fmt"
	"path/filepath"
	"strings"
)

// diffContext is the number of unchanged lines shown around a change.
const diffContext = 3

// diffCells bounds the table of the line matching (lines removed × lines
// added, after the common start and end are set aside): past it, the
// changed stretch is shown as removed whole and added whole.
const diffCells = 16 << 20

// edit is one line of a diff: ' ' kept, '-' removed, '+' added.
type edit struct {
	op   byte
	line string
}

// unifiedDiff returns the changes from a to b (texts named name) in the
// unified format, with paths a/NAME and b/NAME (so that `git apply` and
// `patch -p1` take it), or "" when they are equal.
func unifiedDiff(name string, a, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	edits := diffLines(splitLines(string(a)), splitLines(string(b)))
	var out strings.Builder
	name = filepath.ToSlash(filepath.Clean(name))
	tab := "" // as git diff: a name with a space ends with a tab, for patch(1)
	if strings.Contains(name, " ") {
		tab = "\t"
	}
	fmt.Fprintf(&out, "--- a/%s%s\n+++ b/%s%s\n", name, tab, name, tab)
	// Walk the edits, cutting hunks: a change with up to diffContext kept
	// lines on each side; changes closer than twice that share a hunk.
	oldLine, newLine := 1, 1 // the line numbers of edits[i] in a and b
	for i := 0; i < len(edits); {
		if edits[i].op == ' ' {
			i++
			oldLine++
			newLine++
			continue
		}
		start := max(i-diffContext, 0)
		for k := i - 1; k >= start; k-- {
			oldLine--
			newLine--
		}
		end := i
		for end < len(edits) {
			if edits[end].op != ' ' {
				end++
				continue
			}
			run := end
			for run < len(edits) && edits[run].op == ' ' {
				run++
			}
			if run == len(edits) || run-end > 2*diffContext {
				end = min(end+diffContext, run)
				break
			}
			end = run
		}
		var olds, news int
		for _, e := range edits[start:end] {
			if e.op != '+' {
				olds++
			}
			if e.op != '-' {
				news++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(oldLine, olds), hunkRange(newLine, news))
		for _, e := range edits[start:end] {
			out.WriteByte(e.op)
			line, noEOL := strings.CutSuffix(e.line, noNewline)
			out.WriteString(line)
			out.WriteByte('\n')
			if noEOL {
				out.WriteString("\\ No newline at end of file\n")
			}
		}
		oldLine += olds
		newLine += news
		i = end
	}
	return out.String()
}

// hunkRange is a hunk header's "start,count" (a count of 0 starts at the
// line before, as diff -u writes it).
func hunkRange(start, count int) string {
	if count == 0 {
		start--
	}
	if count == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}

// noNewline marks a last line without a line break.
const noNewline = "\x00no newline"

// splitLines splits s into lines without their line breaks.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if !strings.HasSuffix(s, "\n") {
		lines[len(lines)-1] += noNewline
	}
	return lines
}

// diffLines returns the edits turning a into b: the common start and end
// kept, the stretch between matched by a longest common subsequence.
func diffLines(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var edits []edit
	for _, l := range a[:pre] {
		edits = append(edits, edit{' ', l})
	}
	edits = append(edits, matchLines(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		edits = append(edits, edit{' ', l})
	}
	return edits
}

// matchLines diffs a and b by a longest common subsequence of lines.
func matchLines(a, b []string) []edit {
	var edits []edit
	if len(a)*len(b) > diffCells {
		for _, l := range a {
			edits = append(edits, edit{'-', l})
		}
		for _, l := range b {
			edits = append(edits, edit{'+', l})
		}
		return edits
	}
	// lcs[i*(m+1)+j]: the longest common subsequence of a[i:] and b[j:].
	n, m := len(a), len(b)
	lcs := make([]int32, (n+1)*(m+1))
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*(m+1)+j] = lcs[(i+1)*(m+1)+j+1] + 1
			} else {
				lcs[i*(m+1)+j] = max(lcs[(i+1)*(m+1)+j], lcs[i*(m+1)+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			edits = append(edits, edit{' ', a[i]})
			i++
			j++
		case i < n && (j == m || lcs[(i+1)*(m+1)+j] >= lcs[i*(m+1)+j+1]):
			edits = append(edits, edit{'-', a[i]}) // removals before additions
			i++
		default:
			edits = append(edits, edit{'+', b[j]})
			j++
		}
	}
	return edits
}
