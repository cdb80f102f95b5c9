package figures

import (
	"errors"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestTopIndices(t *testing.T) {
	// Features x 2 components, row-major.
	basis := []float64{
		0.1, 5,
		0.9, 5,
		0.5, 0,
		0.9, 1,
		0.0, 2,
	}
	for _, tc := range []struct {
		i, top int
		want   []int
	}{
		{0, 3, []int{1, 3, 2}}, // tie between 1 and 3: the lower index first
		{1, 2, []int{0, 1}},
		{1, 10, []int{0, 1, 4, 3, 2}}, // top > m: all of them
		{0, 0, []int{}},
	} {
		if got := TopIndices(basis, 5, 2, tc.i, tc.top); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("TopIndices(component %d, top %d) = %v, want %v", tc.i, tc.top, got, tc.want)
		}
	}
	// NaN ranks last and does not break the order.
	nan := []float64{1, math.NaN(), 3, 2}
	if got := TopIndices(nan, 4, 1, 0, 3); !reflect.DeepEqual(got, []int{2, 3, 0}) {
		t.Errorf("with a NaN: %v", got)
	}
}

// svgTexts returns the texts of the SVG's <text> elements.
func svgTexts(svg string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(svg, -1) {
		out = append(out, m[1])
	}
	return out
}

// barBasis is an m x k basis whose component i has its top features at i*7+j (j < 10),
// value 10-j, and small values elsewhere.
func barBasis(m, k int) []float64 {
	basis := make([]float64, m*k)
	for f := 0; f < m; f++ {
		for i := 0; i < k; i++ {
			basis[f*k+i] = 0.001 * float64((f*31+i*17)%13)
		}
	}
	for i := 0; i < k; i++ {
		for j := 0; j < 10; j++ {
			basis[(i*7+j)*k+i] = float64(10 - j)
		}
	}
	return basis
}

func TestTopFeaturesNonImageBasis(t *testing.T) {
	const m, k = 60, 3
	numbered := func(f int) string { return fmt.Sprintf("feature %d", f) }
	for _, tc := range []struct {
		name  string
		names string   // features.txt; "" for none
		tsv   []string // the names of basis.tsv's rows; nil for no basis.tsv
		label func(f int) string
		warn  string // what the one warning names; "" for none
	}{
		{"numbered", "", nil, numbered, ""},
		{"named", names(m, "word"), nil, func(f int) string { return fmt.Sprintf("word%02d", f) }, ""},
		{"names of another length", names(m-1, "word"), nil, numbered, "features.txt"},
		{"named by basis.tsv", "", nameRows(m, "gene"), func(f int) string { return fmt.Sprintf("gene%02d", f) }, ""},
		{"basis.tsv over features.txt", names(m, "word"), nameRows(m, "gene"), func(f int) string { return fmt.Sprintf("gene%02d", f) }, ""},
		{"basis.tsv numbered, features.txt named", names(m, "word"), indexRows(m), func(f int) string { return fmt.Sprintf("word%02d", f) }, ""},
		{"basis.tsv numbered", "", indexRows(m), numbered, ""},
		{"basis.tsv of another shape", "", nameRows(m-1, "gene"), numbered, "basis.tsv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeBasis(t, dir, m, k, barBasis(m, k))
			writeReport(t, dir, map[string]any{"m": m, "n": 500, "k": k, "algo": "hals", "history": history(3, true)})
			if tc.names != "" {
				if err := os.WriteFile(filepath.Join(dir, NamesFile), []byte(tc.names), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.tsv != nil {
				writeBasisTSV(t, dir, k, tc.tsv)
			}
			var warnings []string
			written, err := WriteResult(dir, "", Options{Warn: func(s string) { warnings = append(warnings, s) }})
			if err != nil {
				t.Fatal(err)
			}
			if (tc.warn != "") != (len(warnings) == 1) || len(warnings) > 1 || (tc.warn != "" && !strings.Contains(warnings[0], tc.warn)) {
				t.Errorf("warnings %q, want one naming %q", warnings, tc.warn)
			}
			img := readPNG(t, written[2])
			checkNotBlank(t, "basis.png", img)
			if b := img.Bounds(); b.Dx() > 1600 || b.Dx() < 800 {
				t.Errorf("basis.png is %d px wide", b.Dx())
			}
			if n := countNear(img, [3]int{0x1f, 0x77, 0xb4}, 8); n < 3*10*100 {
				t.Errorf("%d bar-blue pixels, want 3 charts of 10 bars", n)
			}
			svg, err := os.ReadFile(written[3])
			if err != nil {
				t.Fatal(err)
			}
			texts := strings.Join(svgTexts(string(svg)), "|") + "|"
			for i := 0; i < k; i++ {
				if !strings.Contains(texts, fmt.Sprintf("|component %d|", i+1)) {
					t.Errorf("no title for component %d", i)
				}
				for j := 0; j < 10; j++ {
					if !strings.Contains(texts, "|"+tc.label(i*7+j)+"|") {
						t.Errorf("component %d: top feature %q not labelled", i, tc.label(i*7+j))
					}
				}
			}
			// A feature in no component's top 10 is not shown.
			if strings.Contains(texts, "|"+tc.label(m-1)+"|") {
				t.Errorf("feature %d, in no top 10, is labelled", m-1)
			}
		})
	}
}

// nameRows is n names of basis.tsv's rows: prefix and the index.
func nameRows(n int, prefix string) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return s
}

// indexRows is the first column of a basis.tsv of a result without names.
func indexRows(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}

// writeBasisTSV writes dir/basis.tsv of k components whose rows are named rows.
func writeBasisTSV(t *testing.T, dir string, k int, rows []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("feature")
	for p := 1; p <= k; p++ {
		fmt.Fprintf(&b, "\tcomponent_%d", p)
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString(r + strings.Repeat("\t0.5", k) + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, BasisTSVFile), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTopFeaturesLongNames: names too wide for a label are cut to barLabelWidth with an
// ellipsis (so labels never reach into the bars or the next chart), markup and control
// characters in them stay text, and the bars are drawn as with short names.
func TestTopFeaturesLongNames(t *testing.T) {
	const m, k = 40, 3
	rows := make([]string, m)
	for f := range rows {
		rows[f] = fmt.Sprintf("<%02d&>\x01", f) + strings.Repeat(" a rather long gene name", 6)
	}
	rows[1] = "short & <b>"
	dir := t.TempDir()
	writeBasis(t, dir, m, k, barBasis(m, k))
	writeReport(t, dir, map[string]any{"m": m, "n": 500, "k": k, "algo": "hals", "history": history(3, true)})
	writeBasisTSV(t, dir, k, rows)
	written, err := WriteResult(dir, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(written[3])
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, s := range svgTexts(string(svg)) {
		texts = append(texts, html.UnescapeString(s))
	}
	sty := tickStyle()
	for i := 0; i < k; i++ {
		for j := 0; j < 10; j++ {
			f := i*7 + j
			want := rows[f]
			found := false
			for _, s := range texts {
				if f == 1 {
					found = found || s == want
					continue
				}
				prefix := fmt.Sprintf("<%02d&>\ufffd a rather", f)
				if strings.HasPrefix(s, prefix) {
					found = true
					if !strings.HasSuffix(s, "…") || sty.Width(s) > barLabelWidth || len(s) >= len(want) {
						t.Errorf("feature %d labelled %q (%v wide), want it cut to %v with an ellipsis", f, s, sty.Width(s), barLabelWidth)
					}
				}
			}
			if !found {
				t.Errorf("component %d: feature %d (%q) not labelled", i, f, want)
			}
		}
	}
	img := readPNG(t, written[2])
	if n := countNear(img, [3]int{0x1f, 0x77, 0xb4}, 8); n < 3*10*100 {
		t.Errorf("%d bar-blue pixels, want 3 charts of 10 bars", n)
	}
}

func TestReadBasisTSVNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, BasisTSVFile)
	head := "feature\tcomponent_1\tcomponent_2\n"
	for _, tc := range []struct {
		name, content string
		want          []string
		err           string // what the error says; "" for none
	}{
		{"named", head + "a\t1\t2\nb b\t0\t1e-300\n", []string{"a", "b b"}, ""},
		{"numbered", head + "0\t1\t2\n1\t0\t0\n", nil, ""},
		{"numbered in another order", head + "1\t1\t2\n0\t0\t0\n", []string{"1", "0"}, ""},
		{"another header", "gene\tcomponent_1\tcomponent_2\na\t1\t2\nb\t0\t1\n", nil, ":1:"},
		{"another rank", "feature\tcomponent_1\na\t1\nb\t0\n", nil, ":1:"},
		{"a row short of values", head + "a\t1\t2\nb\t0\n", nil, ":3:"},
		{"too many rows", head + "a\t1\t2\nb\t0\t1\nc\t0\t1\n", nil, ":4:"},
		{"too few rows", head + "a\t1\t2\n", nil, ":3: 1 rows"},
		{"empty", "", nil, ":1:"},
		{"a line too long", head + "a\t1\t2\n" + strings.Repeat("x", 1<<20) + "\t0\t0\n", nil, ":3:"},
		{"not UTF-8", head + "a\t1\t2\n\xff\t0\t0\n", nil, ":3:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadBasisTSVNames(path, 2, 2)
			if tc.err == "" {
				if err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Errorf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), path+tc.err) {
				t.Errorf("got %q, %v; want an input error saying %q", got, err, path+tc.err)
			}
		})
	}
	if got, err := ReadBasisTSVNames(filepath.Join(dir, "none.tsv"), 2, 2); got != nil || err != nil {
		t.Errorf("a missing file: %v, %v", got, err)
	}
}

func names(n int, prefix string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s%02d\r\n", prefix, i)
	}
	return b.String()
}

func TestReadFeatureNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	for _, tc := range []struct {
		content string
		m       int
		want    []string
		ok      bool
	}{
		{"a\nb\nc\n", 3, []string{"a", "b", "c"}, true},
		{"a\nb\nc", 3, []string{"a", "b", "c"}, true},
		{"a\r\n\r\nc\r\n", 3, []string{"a", "", "c"}, true},
		{"a\nb\n", 3, nil, false},
		{"a\nb\nc\nd\n", 3, nil, false},
		{"", 1, nil, false},
	} {
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFeatureNames(path, tc.m)
		if tc.ok != (err == nil) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ReadFeatureNames(%q, %d) = %q, %v", tc.content, tc.m, got, err)
		}
	}
	if got, err := ReadFeatureNames(filepath.Join(dir, "none.txt"), 3); got != nil || err != nil {
		t.Errorf("a missing file: %v, %v", got, err)
	}
}

func TestTopFeaturesExtremeValues(t *testing.T) {
	// One component per extreme: all zero, denormal, huge, the largest float64, and NaN and
	// Inf (which a .npy read by matio cannot hold, but a caller can pass).
	vals := []float64{0, 5e-324, 1e300, math.MaxFloat64, math.NaN(), math.Inf(1)}
	const m = 4
	k := len(vals)
	basis := make([]float64, m*k)
	for f := 0; f < m; f++ {
		for i, v := range vals {
			basis[f*k+i] = v
		}
	}
	fig, err := TopFeatures("extremes", basis, m, k, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	render(t, fig) // rasterized too: gg gets the coordinates
	if _, err := TopFeatures("t", basis[:5], m, k, 3, nil); err == nil {
		t.Error("a short basis: no error")
	}
}
