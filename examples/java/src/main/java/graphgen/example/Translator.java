package graphgen.example;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtLoggingLevel;
import ai.onnxruntime.OrtSession;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A graphgen text-level file, loaded once: strings in, translations out, one {@code session.run}.
 *
 * <p>The tokenizer, the search and the detokenizer are all inside the file, in standard ONNX ops
 * ({@code graphgen export}'s default, {@code --tokenizer onnx}): ONNX Runtime is the only dependency.
 * The texts go in as UTF-8 bytes ({@code text_utf8}: uint8 {@code [batch, bytes]}, zero-padded): a
 * U+0000 inside a text is carried, one at its end is refused. A session may be used from several
 * threads at once.
 */
public final class Translator implements AutoCloseable {
  private static final String TEXT_UTF8 = "text_utf8";
  private static final String SOURCE_LANGUAGE = "source_language";
  private static final String TARGET_LANGUAGE = "target_language";
  private static final String TRUNCATE = "truncate";
  // the generation settings a copy can keep as required inputs (graphgen bake --keep), by type
  private static final Set<String> INT_SETTINGS =
      Set.of("num_beams", "num_return_sequences", "max_length", "min_length");
  private static final Set<String> FLOAT_SETTINGS = Set.of("length_penalty", "repetition_penalty");
  private final OrtEnvironment env = OrtEnvironment.getEnvironment();
  private final OrtSession session;

  /** Loads {@code model}, a text-level file written by {@code graphgen export}. */
  public Translator(Path model) throws OrtException {
    if (!Files.isRegularFile(model)) {
      throw new IllegalArgumentException("model file not found: " + model);
    }
    String wrongKind =
        model + " is not a text-level file with the portable tokenizer: export it with `graphgen export MODEL -o"
            + " FILE` (the default, --tokenizer onnx); a --tokenizer extensions file needs onnxruntime-extensions";
    try (OrtSession.SessionOptions options = new OrtSession.SessionOptions()) {
      options.setSessionLogLevel(OrtLoggingLevel.ORT_LOGGING_LEVEL_ERROR); // not the notice per optional input
      // as graphgen.Translator: ONNX Runtime's replay of a run's allocations would hold a batch's
      // search memory twice (README, Memory)
      options.setMemoryPatternOptimization(false);
      session = env.createSession(model.toString(), options);
    } catch (OrtException error) {
      if (String.valueOf(error.getMessage()).contains("ai.onnx.contrib")) {
        throw new IllegalArgumentException(wrongKind, error);
      }
      throw error;
    }
    if (!session.getInputNames().contains(TEXT_UTF8)) {
      session.close();
      throw new IllegalArgumentException(wrongKind);
    }
  }

  /**
   * The language codes the file knows, from its {@code graphgen.languages} metadata (NLLB, M2M100
   * and mBART-50 files; empty for the others): for a language picker, or to check a code first.
   */
  public List<String> languages() throws OrtException {
    return metadataList("graphgen.languages");
  }

  /**
   * The tokens that, typed at the start of a text, choose the target language, in id order, from the
   * file's {@code graphgen.target_tags} metadata (opus-mt's {@code >>cmn_Hans<<}, MADLAD-400's
   * {@code <2de>}; empty for the others): for a language picker, as {@link #languages()} is.
   */
  public List<String> targetTags() throws OrtException {
    return metadataList("graphgen.target_tags");
  }

  /** The strings of the JSON list in the file's metadata entry {@code key}; none when it is absent. */
  private List<String> metadataList(String key) throws OrtException {
    return jsonStrings(key, session.getMetadata().getCustomMetadata().getOrDefault(key, "[]"));
  }

  /**
   * The items of {@code list}, a JSON list of non-empty strings without quotes or backslashes (codes:
   * ASCII letters, digits, '_', '-'; tags: as {@code >>cmn_Hans<<} and {@code <2de>}, which graphgen
   * lists only when they are such strings); anything else is refused, naming {@code key}, as the Rust,
   * Go and C examples refuse it.
   */
  static List<String> jsonStrings(String key, String list) {
    String inner = list.strip();
    if (!inner.startsWith("[") || !inner.endsWith("]")) {
      throw new IllegalStateException(key + " is not a JSON list of strings: " + list);
    }
    inner = inner.substring(1, inner.length() - 1).strip();
    List<String> items = new ArrayList<>();
    if (inner.isEmpty()) {
      return items;
    }
    for (String part : inner.split(",", -1)) {
      String item = part.strip();
      String text = item.length() >= 2 ? item.substring(1, item.length() - 1) : "";
      boolean plain = item.length() > 2 && item.startsWith("\"") && item.endsWith("\"")
          && text.indexOf('"') < 0 && text.indexOf('\\') < 0;
      if (!plain) {
        throw new IllegalStateException(key + " is not a JSON list of strings: " + list);
      }
      items.add(text);
    }
    return items;
  }

  /** One translation per input, in order; an empty list gives an empty list. */
  public List<String> translate(List<String> texts) throws OrtException {
    return run(texts, Map.of(), Map.of());
  }

  /**
   * One translation per input, with generation settings chosen per call: {@code settings} maps
   * input names ({@code num_beams}, {@code max_length}, {@code min_length}, {@code
   * num_return_sequences}, {@code length_penalty}, {@code repetition_penalty}) to values. For a copy
   * that keeps them as required inputs ({@code graphgen bake --keep num_beams,max_length}): Java
   * cannot feed a file's optional inputs, and every input the copy keeps must be given.
   */
  public List<String> translate(List<String> texts, Map<String, ? extends Number> settings) throws OrtException {
    return run(texts, Map.of(), settings);
  }

  /** {@link #translate(List, List, List)} with one source and one target language for every text. */
  public List<String> translate(List<String> texts, String sourceLanguage, String targetLanguage)
      throws OrtException {
    return translate(texts, List.of(sourceLanguage), List.of(targetLanguage));
  }

  /**
   * One translation per input, with the languages chosen per call: each list holds one code for
   * every text or one code per text, spelled as the model's tokenizer spells them ({@code eng_Latn},
   * {@code fr_XX}, ...). For NLLB, M2M100 and mBART-50 files copied with {@code graphgen bake
   * --keep-languages}: Java cannot feed a file's optional inputs, and the copy makes the two
   * language inputs required. An unknown code stops the run with an error naming the input.
   */
  public List<String> translate(
      List<String> texts, List<String> sourceLanguages, List<String> targetLanguages) throws OrtException {
    return translate(texts, sourceLanguages, targetLanguages, Map.of());
  }

  /**
   * The languages as in {@link #translate(List, List, List)} and the settings as in {@link
   * #translate(List, Map)}: for a copy made with {@code graphgen bake --keep-languages --keep ...}.
   */
  public List<String> translate(
      List<String> texts,
      List<String> sourceLanguages,
      List<String> targetLanguages,
      Map<String, ? extends Number> settings)
      throws OrtException {
    if (!session.getInputNames().containsAll(List.of(SOURCE_LANGUAGE, TARGET_LANGUAGE))) {
      throw new IllegalArgumentException(
          "this file takes no language inputs: languages are chosen per call only in NLLB, M2M100 and"
              + " mBART-50 files baked with `graphgen bake --keep-languages`");
    }
    for (List<String> codes : List.of(sourceLanguages, targetLanguages)) {
      if (codes.size() != 1 && codes.size() != texts.size()) {
        throw new IllegalArgumentException(
            "give one language code, or one per text (" + texts.size() + "); got " + codes.size());
      }
    }
    return run(texts, Map.of(SOURCE_LANGUAGE, sourceLanguages, TARGET_LANGUAGE, targetLanguages), settings);
  }

  private List<String> run(
      List<String> texts, Map<String, List<String>> languages, Map<String, ? extends Number> settings)
      throws OrtException {
    checkCarried(texts);
    Set<String> inputs = session.getInputNames();
    for (String name : settings.keySet()) {
      if (!isSetting(name)) {
        throw new IllegalArgumentException("unknown setting " + name + " (settings are named as the file's inputs)");
      }
      if (!inputs.contains(name)) {
        throw new IllegalArgumentException(
            "this file has no " + name + " input that Java can set; use a copy made with `graphgen bake --"
                + name.replace('_', '-') + " VALUE` (fixed) or `graphgen bake --keep " + name + "` (per call)");
      }
      checkSetting(name, settings.get(name));
    }
    for (String name : inputs) {
      if (isSetting(name) && !settings.containsKey(name)) {
        throw new IllegalArgumentException(
            "this file takes " + name + " on every call (a graphgen bake --keep copy): give it in the settings");
      }
    }
    if (texts.isEmpty()) {
      return List.of();
    }
    Map<String, OnnxTensor> feeds = new HashMap<>();
    try {
      feeds.put(TEXT_UTF8, utf8(texts));
      for (var language : languages.entrySet()) {
        feeds.put(language.getKey(), strings(language.getValue()));
      }
      for (var setting : settings.entrySet()) {
        Number value = setting.getValue();
        feeds.put(
            setting.getKey(),
            INT_SETTINGS.contains(setting.getKey())
                ? OnnxTensor.createTensor(env, new int[] {value.intValue()})
                : OnnxTensor.createTensor(env, new float[] {value.floatValue()}));
      }
      if (inputs.contains(TRUNCATE)) { // kept by graphgen bake --keep truncate: false, the default
        feeds.put(TRUNCATE, OnnxTensor.createTensor(env, new boolean[] {false}));
      }
      try (OrtSession.Result result = session.run(feeds, Set.of("translation"))) {
        // [batch, num_return_sequences]: the best hypothesis of each input is column 0.
        String[][] translations = (String[][]) result.get(0).getValue();
        List<String> best = new ArrayList<>(translations.length);
        for (String[] row : translations) {
          best.add(row[0]);
        }
        return best;
      }
    } finally {
      for (OnnxTensor tensor : feeds.values()) {
        tensor.close();
      }
    }
  }

  /**
   * One value by the rules of Python's {@code graphgen.contract.generation_settings} that need no
   * other setting (the file checks the rest itself): an int setting given as 2.5 would otherwise be
   * cut to 2 by {@code intValue()}, and {@code max_length} 1 or past the model's positions would run.
   */
  private void checkSetting(String name, Number value) throws OrtException {
    double number = value.doubleValue();
    if (INT_SETTINGS.contains(name) && (number != Math.rint(number) || Math.abs(number) >= Integer.MAX_VALUE)) {
      throw new IllegalArgumentException(name + " must be an integer, got " + value);
    }
    if (!Double.isFinite(number)) {
      throw new IllegalArgumentException(name + " must be finite, got " + value);
    }
    String maxPositions = session.getMetadata().getCustomMetadata().get("graphgen.max_positions");
    boolean wrong =
        switch (name) {
          case "num_beams", "num_return_sequences" -> number < 1;
          case "max_length" -> number < 2 || (maxPositions != null && number > Integer.parseInt(maxPositions));
          case "min_length" -> number < 0;
          case "repetition_penalty" -> number <= 0;
          default -> false;
        };
    if (wrong) {
      String range =
          switch (name) {
            case "num_beams", "num_return_sequences" -> "at least 1";
            case "max_length" -> "between 2 and the model's " + maxPositions + " positions";
            case "min_length" -> "at least 0";
            default -> "positive";
          };
      throw new IllegalArgumentException(name + " must be " + range + ", got " + value);
    }
  }

  private static boolean isSetting(String name) {
    return INT_SETTINGS.contains(name) || FLOAT_SETTINGS.contains(name);
  }

  /**
   * Refuses texts that end with U+0000, before running, as Python's {@code Translator} does: {@link
   * #utf8} pads each row with zero bytes, and the file takes the zero bytes after a row's last other
   * byte as padding, so a final U+0000 would be dropped and a different text translated. One before
   * other characters is carried (the file tokenizes it as HF does). The message names the texts by
   * their index in the batch (from 0), worded as Python's {@code graphgen.TextInputError}.
   */
  static void checkCarried(List<String> texts) {
    List<String> refused = new ArrayList<>();
    for (int i = 0; i < texts.size(); i++) {
      if (texts.get(i).endsWith("\0")) {
        refused.add(String.valueOf(i));
      }
    }
    if (refused.isEmpty()) {
      return;
    }
    String which =
        texts.size() == 1
            ? "the text"
            : refused.size() == 1
                ? "text " + refused.get(0) + " of the batch"
                : "texts " + String.join(", ", refused) + " of the batch: each";
    throw new IllegalArgumentException(
        which + " ends with U+0000, which the file's bytes input cannot carry (its rows are padded with zero"
            + " bytes); remove it");
  }

  /** The texts as UTF-8 rows of one width, zero-padded: the {@code text_utf8} input. */
  private OnnxTensor utf8(List<String> texts) throws OrtException {
    List<byte[]> rows = new ArrayList<>(texts.size());
    int width = 0;
    for (String text : texts) {
      byte[] row = utf8Bytes(text);
      rows.add(row);
      width = Math.max(width, row.length);
    }
    ByteBuffer data = ByteBuffer.allocateDirect(rows.size() * width);
    for (byte[] row : rows) {
      data.put(row).put(new byte[width - row.length]);
    }
    data.rewind();
    return OnnxTensor.createTensor(env, data, new long[] {rows.size(), width}, OnnxJavaType.UINT8);
  }

  /**
   * {@code text}'s UTF-8 bytes, each lone (unpaired) UTF-16 surrogate written as U+FFFD's (EF BF BD),
   * as Python's {@code Translator} and JavaScript's {@code TextEncoder} write it, so that a string
   * gives the same translation here as there; a surrogate pair is its code point's four bytes. ({@code
   * String.getBytes(UTF_8)} would write a lone surrogate as '?': a different text.)
   */
  static byte[] utf8Bytes(String text) {
    StringBuilder replaced = null;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (!Character.isSurrogate(c)) {
        if (replaced != null) {
          replaced.append(c);
        }
      } else if (Character.isHighSurrogate(c) && i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
        if (replaced != null) {
          replaced.append(c).append(text.charAt(i + 1));
        }
        i++; // the pair's low half
      } else { // a high surrogate not followed by a low one, or a low one not after a high one
        if (replaced == null) {
          replaced = new StringBuilder(text.length()).append(text, 0, i);
        }
        replaced.append('\uFFFD');
      }
    }
    return (replaced == null ? text : replaced.toString()).getBytes(StandardCharsets.UTF_8);
  }

  private OnnxTensor strings(List<String> values) throws OrtException {
    return OnnxTensor.createTensor(env, values.toArray(new String[0]), new long[] {values.size()});
  }

  @Override
  public void close() throws OrtException {
    session.close();
  }
}
