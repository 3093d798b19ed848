package spec

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// didYouMean returns ` (did you mean "x"?)` naming the candidate closest to
// s by edit distance, or else the only one s is the start of; "" when none
// is close.
func didYouMean(s string, candidates []string) string {
	if c := nearest(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

func nearest(s string, candidates []string) string {
	typos := maxTypos(s)
	best, bestDist := "", typos+1
	for _, c := range candidates {
		if abs(utf8.RuneCountInString(c)-utf8.RuneCountInString(s)) > typos || c == s {
			continue
		}
		if d := editDistance(s, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" {
		return best
	}
	if len(s) < 3 {
		return ""
	}
	var longer []string
	for _, c := range candidates {
		if strings.HasPrefix(c, s) && c != s {
			longer = append(longer, c)
		}
	}
	if len(longer) == 1 {
		return longer[0]
	}
	return ""
}

func abs(n int) int {
	return max(n, -n)
}

// maxTypos is how many edits still count as a typo of s.
func maxTypos(s string) int {
	return min(2, max(1, utf8.RuneCountInString(s)/3))
}

// editDistance is the optimal string alignment distance between a and b,
// in runes: insertions, deletions, substitutions and transpositions of
// neighbours each cost 1.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
