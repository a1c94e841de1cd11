// Package translate runs a graphgen text-level file from Go: strings in, strings out, one run.
//
// The binding is github.com/yalue/onnxruntime_go (cgo); ONNX Runtime itself is a shared library
// loaded at run time (the one inside the onnxruntime Python wheel works). Nothing else is needed:
// the file's tokenizer is built from standard ONNX ops (graphgen export's default, --tokenizer
// onnx). Texts go in as UTF-8 bytes (text_utf8, uint8 [batch, bytes], zero-padded), which a Go
// string already is, and translations come back as bytes (translation_utf8, translation_lengths).
package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

var (
	initOnce sync.Once
	initErr  error
)

// Init loads ONNX Runtime from library (libonnxruntime.so); later calls reuse the first load.
func Init(library string) error {
	initOnce.Do(func() {
		if _, err := os.Stat(library); err != nil {
			initErr = fmt.Errorf("ONNX Runtime library not found: %s", library)
			return
		}
		ort.SetSharedLibraryPath(library)
		initErr = ort.InitializeEnvironment(ort.WithLogLevelError())
	})
	return initErr
}

// Translator is a loaded file. Languages reports whether it was opened with language inputs,
// Settings the generation settings it feeds on every call (OpenSettings).
type Translator struct {
	session      *ort.DynamicAdvancedSession
	Languages    bool
	Settings     []string
	maxPositions int      // the file's graphgen.max_positions (0: not recorded), the longest max_length
	codes        []string // the file's graphgen.languages (nil for a file without language codes)
	tags         []string // the file's graphgen.target_tags (nil for a file without target tags)
}

// LanguageCodes lists the language codes the file knows, from its graphgen.languages metadata
// (NLLB, M2M100 and mBART-50 files; empty for the others): for a language picker, or to check a
// code before a call (the file itself refuses an unknown one, naming the input).
func (t *Translator) LanguageCodes() []string {
	return append([]string(nil), t.codes...)
}

// TargetTags lists the tokens that, typed at the start of a text, choose the target language, in id
// order, from the file's graphgen.target_tags metadata (opus-mt's >>cmn_Hans<<, MADLAD-400's <2de>;
// empty for files without such tokens: NLLB, mBART, T5): for a language picker.
func (t *Translator) TargetTags() []string {
	return append([]string(nil), t.tags...)
}

// The generation settings a file takes as inputs, by type (a file's optional inputs, or those a
// `graphgen bake --keep` copy kept).
var intSettings = map[string]bool{"num_beams": true, "num_return_sequences": true, "max_length": true, "min_length": true}
var floatSettings = map[string]bool{"length_penalty": true, "repetition_penalty": true}

// ErrWrongKind: the file is not a text-level file with the portable tokenizer.
var ErrWrongKind = errors.New("not a text-level file with the portable tokenizer: export it with " +
	"`graphgen export MODEL -o FILE` (the default, --tokenizer onnx); a --tokenizer extensions file " +
	"needs onnxruntime-extensions")

// Open loads model. With languages, source_language and target_language are inputs of every run
// (NLLB, M2M100 and mBART-50 files: the C API feeds a file's optional inputs, no baked copy needed).
func Open(model string, languages bool) (*Translator, error) {
	return OpenSettings(model, languages)
}

// OpenSettings is Open with generation settings chosen per call: each of settings (num_beams,
// max_length, min_length, num_return_sequences, length_penalty, repetition_penalty) becomes an
// input that TranslateSettings feeds on every call. The C API feeds a file's optional inputs, so
// the exported file works as it is (and so does a `graphgen bake --keep` copy).
func OpenSettings(model string, languages bool, settings ...string) (*Translator, error) {
	for _, name := range settings {
		if !intSettings[name] && !floatSettings[name] {
			return nil, fmt.Errorf("unknown setting %s (settings are named as the file's inputs: num_beams, max_length, ...)", name)
		}
	}
	if _, err := os.Stat(model); err != nil {
		return nil, fmt.Errorf("model file not found: %s", model)
	}
	inputs, _, err := ort.GetInputOutputInfo(model)
	if err != nil {
		if strings.Contains(err.Error(), "ai.onnx.contrib") {
			return nil, fmt.Errorf("%s: %w", model, ErrWrongKind)
		}
		return nil, err
	}
	names := map[string]bool{}
	for _, input := range inputs {
		names[input.Name] = true
	}
	if !names["text_utf8"] {
		return nil, fmt.Errorf("%s: %w", model, ErrWrongKind)
	}
	wanted := []string{"text_utf8"}
	if languages {
		wanted = append(wanted, "source_language", "target_language")
	}
	wanted = append(wanted, settings...)
	// As graphgen.Translator: ONNX Runtime's replay of a run's allocations would hold a batch's
	// search memory twice (README, Memory).
	options, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	defer options.Destroy()
	if err := options.SetMemPattern(false); err != nil {
		return nil, err
	}
	session, err := ort.NewDynamicAdvancedSession(model, wanted,
		[]string{"translation_utf8", "translation_lengths"}, options)
	if err != nil {
		return nil, err
	}
	positions := 0
	var codes, tags []string
	if metadata, err := session.GetModelMetadata(); err == nil {
		if value, found, err := metadata.LookupCustomMetadataMap("graphgen.max_positions"); err == nil && found {
			positions, _ = strconv.Atoi(value)
		}
		if value, found, err := metadata.LookupCustomMetadataMap("graphgen.languages"); err == nil && found {
			if err := json.Unmarshal([]byte(value), &codes); err != nil { // a JSON list of strings
				metadata.Destroy()
				session.Destroy()
				return nil, fmt.Errorf("%s: graphgen.languages is not a JSON list of codes: %w", model, err)
			}
		}
		if value, found, err := metadata.LookupCustomMetadataMap("graphgen.target_tags"); err == nil && found {
			if err := json.Unmarshal([]byte(value), &tags); err != nil { // a JSON list of strings
				metadata.Destroy()
				session.Destroy()
				return nil, fmt.Errorf("%s: graphgen.target_tags is not a JSON list of tags: %w", model, err)
			}
		}
		metadata.Destroy()
	}
	return &Translator{session: session, Languages: languages, Settings: settings, maxPositions: positions,
		codes: codes, tags: tags}, nil
}

// checkSetting applies the rules of Python's graphgen.contract.generation_settings that need no other
// setting (the file checks the rest itself): a fraction would be cut to an integer by int32(), and
// max_length 1 or past the model's positions would run.
func (t *Translator) checkSetting(name string, value float64) error {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return fmt.Errorf("%s must be finite, got %v", name, value)
	}
	if intSettings[name] && (value != math.Trunc(value) || math.Abs(value) >= math.MaxInt32) {
		return fmt.Errorf("%s must be a whole number, got %v", name, value)
	}
	switch {
	case (name == "num_beams" || name == "num_return_sequences") && value < 1:
		return fmt.Errorf("%s must be at least 1, got %v", name, value)
	case name == "max_length" && (value < 2 || (t.maxPositions > 0 && value > float64(t.maxPositions))):
		return fmt.Errorf("max_length must be between 2 and the model's %d positions, got %v", t.maxPositions, value)
	case name == "min_length" && value < 0:
		return fmt.Errorf("min_length must be at least 0, got %v", value)
	case name == "repetition_penalty" && value <= 0:
		return fmt.Errorf("repetition_penalty must be positive, got %v", value)
	}
	return nil
}

// Close frees the session.
func (t *Translator) Close() error { return t.session.Destroy() }

// Translate gives one translation per text (the best hypothesis), in order. A text that ends with
// U+0000 is refused, before running, with a *TextInputError naming it (finalZeros).
func (t *Translator) Translate(texts []string) ([]string, error) {
	if t.Languages {
		return nil, errors.New("this translator was opened with language inputs: use TranslateLanguages")
	}
	return t.TranslateSettings(texts, nil, nil, nil)
}

// TranslateLanguages is Translate with the languages chosen for this call: one code for every text,
// or one per text, spelled as the model's tokenizer spells them (eng_Latn, fr_XX, ...).
func (t *Translator) TranslateLanguages(texts, sources, targets []string) ([]string, error) {
	if !t.Languages {
		return nil, errors.New("open the file with languages=true to choose languages per call")
	}
	return t.TranslateSettings(texts, sources, targets, nil)
}

// TranslateSettings is TranslateLanguages (sources and targets nil for a translator opened without
// languages) with the generation settings of this call: a value for each setting named at
// OpenSettings (whole numbers for num_beams, max_length, min_length, num_return_sequences).
func (t *Translator) TranslateSettings(texts, sources, targets []string, settings map[string]float64) ([]string, error) {
	if err := finalZeros(texts); err != nil {
		return nil, err
	}
	if t.Languages {
		for _, codes := range [][]string{sources, targets} {
			if len(codes) != 1 && len(codes) != len(texts) {
				return nil, fmt.Errorf("give one language code, or one per text (%d); got %d", len(texts), len(codes))
			}
		}
	}
	for _, name := range t.Settings {
		value, ok := settings[name]
		if !ok {
			return nil, fmt.Errorf("this translator feeds %s on every call (OpenSettings): give it", name)
		}
		if err := t.checkSetting(name, value); err != nil {
			return nil, err
		}
	}
	if len(settings) > len(t.Settings) {
		return nil, fmt.Errorf("settings %v: only those named at OpenSettings (%v) are fed", settings, t.Settings)
	}
	return t.run(texts, sources, targets, settings)
}

// TextInputError: texts the file's text_utf8 input cannot carry (Indices, from 0, in the batch);
// nothing was translated. As Python's graphgen.TextInputError.
type TextInputError struct {
	Indices []int
	message string
}

func (e *TextInputError) Error() string { return e.message }

// finalZeros refuses the texts that end with U+0000. The file takes zero bytes after a row's last
// other byte as padding, so a U+0000 inside a text is carried (and tokenized as HF tokenizes it),
// but a final one would be dropped without an error: a different text translated.
func finalZeros(texts []string) error {
	var refused []string
	var indices []int
	for index, text := range texts {
		if strings.HasSuffix(text, "\x00") {
			refused, indices = append(refused, strconv.Itoa(index)), append(indices, index)
		}
	}
	if len(indices) == 0 {
		return nil
	}
	which := "text " + refused[0] + " of the batch" // worded as Python's Translator words it
	if len(texts) == 1 {
		which = "the text"
	} else if len(indices) > 1 {
		which = "texts " + strings.Join(refused, ", ") + " of the batch: each"
	}
	return &TextInputError{Indices: indices, message: which + " ends with U+0000, which the file's bytes " +
		"input cannot carry (its rows are padded with zero bytes); remove it"}
}

func stringTensor(values []string) (*ort.StringTensor, error) {
	tensor, err := ort.NewStringTensor(ort.NewShape(int64(len(values))))
	if err != nil {
		return nil, err
	}
	if err := tensor.SetContents(values); err != nil {
		tensor.Destroy()
		return nil, err
	}
	return tensor, nil
}

func (t *Translator) run(texts, sources, targets []string, settings map[string]float64) ([]string, error) {
	if len(texts) == 0 {
		return []string{}, nil
	}
	width := 0
	for _, text := range texts {
		width = max(width, len(text))
	}
	data := make([]uint8, len(texts)*width)
	for row, text := range texts {
		copy(data[row*width:], text)
	}
	if width == 0 { // ONNX Runtime refuses an empty buffer: give it one zero byte of padding
		width, data = 1, make([]uint8, len(texts))
	}
	bytes, err := ort.NewTensor(ort.NewShape(int64(len(texts)), int64(width)), data)
	if err != nil {
		return nil, err
	}
	defer bytes.Destroy()
	inputs := []ort.Value{bytes}
	if t.Languages {
		for _, codes := range [][]string{sources, targets} {
			tensor, err := stringTensor(codes)
			if err != nil {
				return nil, err
			}
			defer tensor.Destroy()
			inputs = append(inputs, tensor)
		}
	}
	for _, name := range t.Settings {
		var tensor ort.Value
		var err error
		if intSettings[name] {
			tensor, err = ort.NewTensor(ort.NewShape(1), []int32{int32(settings[name])})
		} else {
			tensor, err = ort.NewTensor(ort.NewShape(1), []float32{float32(settings[name])})
		}
		if err != nil {
			return nil, err
		}
		defer tensor.Destroy()
		inputs = append(inputs, tensor)
	}
	outputs := []ort.Value{nil, nil} // allocated by ONNX Runtime: their shapes depend on the run
	if err := t.session.Run(inputs, outputs); err != nil {
		return nil, err
	}
	defer outputs[0].Destroy()
	defer outputs[1].Destroy()
	utf8 := outputs[0].(*ort.Tensor[uint8])
	lengths := outputs[1].(*ort.Tensor[int64]).GetData()
	shape := utf8.GetShape() // [batch, num_return_sequences, bytes]
	returned, size := int(shape[1]), int(shape[2])
	all := utf8.GetData()
	out := make([]string, len(texts))
	for row := range out {
		at := row * returned // the best hypothesis of each text
		out[row] = string(all[at*size : at*size+int(lengths[at])])
	}
	return out, nil
}
