package translate

// The demo test set and the NLLB fixture through the portable file: the same strings as graphgen's
// Python path. ORT_LIBRARY names libonnxruntime.so and GRAPHGEN_FIXTURES the folder that
// examples/fixtures.py wrote (`make examples` sets both).

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	folder := os.Getenv("GRAPHGEN_FIXTURES")
	if folder == "" {
		t.Fatal("set GRAPHGEN_FIXTURES")
	}
	return filepath.Join(folder, name)
}

func lines(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(fixture(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func open(t *testing.T, name string, languages bool) *Translator {
	t.Helper()
	if err := Init(os.Getenv("ORT_LIBRARY")); err != nil {
		t.Fatal(err)
	}
	translator, err := Open(fixture(t, name), languages)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { translator.Close() })
	return translator
}

func equal(t *testing.T, got, want []string, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d translations, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d is %q, want %q", what, i, got[i], want[i])
		}
	}
}

func TestDemoSentencesOneAtATimeAndInBatchesOf16(t *testing.T) {
	translator := open(t, "demo-en-zh.onnx", false)
	sources, expected := lines(t, "sources.txt"), lines(t, "expected.txt")
	if len(sources) != 300 || len(expected) != 300 {
		t.Fatalf("fixtures: %d sources, %d translations", len(sources), len(expected))
	}
	var single, batched []string
	for _, source := range sources {
		got, err := translator.Translate([]string{source})
		if err != nil {
			t.Fatal(err)
		}
		single = append(single, got...)
	}
	equal(t, single, expected, "one at a time")
	for start := 0; start < len(sources); start += 16 {
		got, err := translator.Translate(sources[start:min(start+16, len(sources))])
		if err != nil {
			t.Fatal(err)
		}
		batched = append(batched, got...)
	}
	equal(t, batched, expected, "batches of 16")
}

func TestNLLBLanguagesPerCallAndPerText(t *testing.T) {
	translator := open(t, "nllb.onnx", true) // the file as exported: Go feeds its optional inputs
	var rows [][]string
	for _, line := range lines(t, "languages.tsv") {
		rows = append(rows, strings.Split(line, "\t"))
	}
	if len(rows) != 72 {
		t.Fatalf("%d rows", len(rows))
	}
	for start := 0; start < 72; start += 24 {
		group := rows[start : start+24]
		var texts, want []string
		for _, row := range group {
			texts, want = append(texts, row[2]), append(want, row[3])
		}
		got, err := translator.TranslateLanguages(texts, []string{group[0][0]}, []string{group[0][1]})
		if err != nil {
			t.Fatal(err)
		}
		equal(t, got, want, "target "+group[0][1])
	}
	var texts, targets, want []string
	for i := 0; i < 8; i++ {
		row := rows[(i%3)*24+i]
		texts, targets, want = append(texts, row[2]), append(targets, row[1]), append(want, row[3])
	}
	got, err := translator.TranslateLanguages(texts, []string{"eng_Latn"}, targets)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, want, "a target per text")
	if _, err := translator.TranslateLanguages([]string{"Hello."}, []string{"eng_Latn"}, []string{"xx_Nope"}); err == nil ||
		!strings.Contains(err.Error(), "unknown target_language") {
		t.Fatalf("an unknown code: %v", err)
	}
}

func TestLongSourceEmptyBatchAndWrongFiles(t *testing.T) {
	translator := open(t, "demo-en-zh.onnx", false)
	long := lines(t, "long.txt")
	if _, err := translator.Translate(long[:1]); err == nil || !strings.Contains(err.Error(), "longer than the model's limit of 512 tokens") {
		t.Fatalf("a long source: %v", err)
	}
	cutting := open(t, "demo-en-zh-truncate.onnx", false)
	got, err := cutting.Translate(long[:1])
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, long[1:2], "truncated")
	if got, err := translator.Translate(nil); err != nil || len(got) != 0 {
		t.Fatalf("an empty batch: %v %v", got, err)
	}
	empty, err := translator.Translate([]string{""})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, empty, lines(t, "empty.txt"), "an empty text")
	if _, err := Open(fixture(t, "missing.onnx"), false); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("a missing file: %v", err)
	}
	if _, err := Open(fixture(t, "demo-en-zh-extensions.onnx"), false); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("the extensions file: %v", err)
	}
}

// Settings chosen per call: the exported file's optional inputs (the C API feeds them) and a
// `graphgen bake --keep num_beams,max_length` copy's required ones give Python's strings.
func TestSettingsPerCall(t *testing.T) {
	if err := Init(os.Getenv("ORT_LIBRARY")); err != nil {
		t.Fatal(err)
	}
	sources, want := lines(t, "sources.txt")[:16], lines(t, "expected-settings.txt")
	settings := map[string]float64{"num_beams": 2, "max_length": 8}
	for _, name := range []string{"demo-en-zh.onnx", "demo-en-zh-settings.onnx"} {
		translator, err := OpenSettings(fixture(t, name), false, "num_beams", "max_length")
		if err != nil {
			t.Fatal(err)
		}
		defer translator.Close()
		got, err := translator.TranslateSettings(sources, nil, nil, settings)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, got, want, name)
		if _, err := translator.Translate(sources[:1]); err == nil || !strings.Contains(err.Error(), "feeds num_beams on every call") {
			t.Fatalf("%s without its settings: %v", name, err)
		}
		// values by Python's rules, before running: not cut to a whole number, not past the positions
		for _, bad := range []map[string]float64{
			{"num_beams": 2.5, "max_length": 8}, {"num_beams": 0, "max_length": 8},
			{"num_beams": 2, "max_length": 1}, {"num_beams": 2, "max_length": 100000},
		} {
			want := "num_beams must be"
			if bad["num_beams"] == 2 {
				want = "max_length must be between 2 and the model's 512 positions"
			}
			if _, err := translator.TranslateSettings(sources[:1], nil, nil, bad); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s with %v: %v", name, bad, err)
			}
		}
	}
	if _, err := OpenSettings(fixture(t, "demo-en-zh.onnx"), false, "beams"); err == nil || !strings.Contains(err.Error(), "unknown setting beams") {
		t.Fatalf("an unknown setting: %v", err)
	}
}

// The codes come from the file's metadata: the list Python reads (nllb-codes.txt), NLLB's 202;
// none for a Marian file.
func TestLanguageCodesFromTheMetadata(t *testing.T) {
	want := lines(t, "nllb-codes.txt")
	if len(want) != 202 {
		t.Fatalf("nllb-codes.txt lists %d codes", len(want))
	}
	equal(t, open(t, "nllb.onnx", true).LanguageCodes(), want, "nllb.onnx codes")
	if codes := open(t, "demo-en-zh.onnx", false).LanguageCodes(); len(codes) != 0 {
		t.Fatalf("a Marian file lists %d codes", len(codes))
	}
}

// The target tags come from the file's metadata: the demo file's two (HF's
// MarianTokenizer.supported_language_codes), in id order; none for an NLLB file.
func TestTargetTagsFromTheMetadata(t *testing.T) {
	equal(t, open(t, "demo-en-zh.onnx", false).TargetTags(), []string{">>cmn_Hans<<", ">>cmn_Hant<<"}, "demo-en-zh.onnx tags")
	if tags := open(t, "nllb.onnx", true).TargetTags(); len(tags) != 0 {
		t.Fatalf("an NLLB file lists %d target tags", len(tags))
	}
}

// A U+0000 inside a text is a character the file tokenizes (as HF does); one at the end of a text
// would be taken for the row's zero padding and dropped, so such a text is refused, by its index,
// before running.
func TestZeroCharacters(t *testing.T) {
	translator := open(t, "demo-en-zh.onnx", false)
	inside, err := translator.Translate([]string{"a\x00b", "ab"})
	if err != nil {
		t.Fatal(err)
	}
	if inside[0] == inside[1] {
		t.Fatalf("a\\x00b translates as ab (%q): the U+0000 was dropped", inside[0])
	}
	for _, c := range []struct {
		texts   []string
		indices []int
		message string
	}{
		{[]string{"I have three cats.", "cats\x00"}, []int{1}, "text 1 of the batch ends with U+0000, which the file's bytes input cannot carry"},
		{[]string{"a", "b\x00", "c\x00d", "\x00"}, []int{1, 3}, "texts 1, 3 of the batch: each ends with U+0000"},
		{[]string{"cats\x00"}, []int{0}, "the text ends with U+0000"},
	} {
		_, err := translator.Translate(c.texts)
		var refused *TextInputError
		if !errors.As(err, &refused) || !strings.HasPrefix(err.Error(), c.message) ||
			!strings.HasSuffix(err.Error(), "(its rows are padded with zero bytes); remove it") {
			t.Fatalf("%q: %v", c.texts, err)
		}
		if !slices.Equal(refused.Indices, c.indices) {
			t.Fatalf("%q: indices %v, want %v", c.texts, refused.Indices, c.indices)
		}
	}
}
