package graphgen.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.onnxruntime.OrtException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * An NLLB file baked with {@code graphgen bake --keep-languages}: the source and target languages
 * chosen per call from Java give the translations graphgen's Python path gives.
 */
class LanguagesTest {
  private record Row(String source, String target, String text, String translation) {}

  private static Translator translator;
  private static List<Row> rows;

  @BeforeAll
  static void load() throws IOException, OrtException {
    Path table = Path.of(System.getProperty("graphgen.languages"));
    rows = new ArrayList<>();
    for (String line : Files.readAllLines(table, StandardCharsets.UTF_8)) {
      String[] fields = line.split("\t", -1);
      rows.add(new Row(fields[0], fields[1], fields[2], fields[3]));
    }
    assertEquals(72, rows.size());
    translator = new Translator(table.resolveSibling("nllb-languages.onnx"));
  }

  @AfterAll
  static void close() throws OrtException {
    translator.close();
  }

  private static Map<String, List<Row>> byTarget() {
    Map<String, List<Row>> groups = new LinkedHashMap<>();
    for (Row row : rows) {
      groups.computeIfAbsent(row.target(), target -> new ArrayList<>()).add(row);
    }
    return groups;
  }

  /**
   * The file's codes, from its metadata: NLLB's 202, the fixtures' sources and targets among them;
   * no target tags.
   */
  @Test
  void theFileListsItsLanguages() throws OrtException {
    List<String> codes = translator.languages();
    assertEquals(202, codes.size());
    for (Row row : rows) {
      assertTrue(codes.contains(row.source()) && codes.contains(row.target()), row.target());
    }
    assertTrue(translator.targetTags().isEmpty()); // the languages are inputs, not tags in the text
  }

  @Test
  void theTargetsGiveDifferentTranslations() {
    // Otherwise the tests below could pass with the target language ignored.
    List<List<Row>> groups = new ArrayList<>(byTarget().values());
    int differ = 0;
    for (int i = 0; i < groups.get(0).size(); i++) {
      final int index = i;
      differ += groups.stream().map(group -> group.get(index).translation()).distinct().count() == 3 ? 1 : 0;
    }
    assertTrue(differ >= 20, differ + " of 24 texts translate differently into each target");
  }

  @Test
  void threeTargetsOneCallEach() throws OrtException {
    Map<String, List<Row>> groups = byTarget();
    assertEquals(3, groups.size());
    for (var group : groups.entrySet()) {
      List<Row> batch = group.getValue();
      List<String> got = translator.translate(batch.stream().map(Row::text).toList(), "eng_Latn", group.getKey());
      assertEquals(batch.stream().map(Row::translation).toList(), got, group.getKey());
    }
  }

  @Test
  void oneSentenceAtATime() throws OrtException {
    for (int i = 0; i < rows.size(); i += 3) { // a third of the rows, every target
      Row row = rows.get(i);
      assertEquals(row.translation(), translator.translate(List.of(row.text()), row.source(), row.target()).get(0));
    }
  }

  @Test
  void aTargetPerText() throws OrtException {
    // One batch mixing the three targets, as a service batching requests would send it.
    List<Row> mixed = new ArrayList<>();
    List<List<Row>> groups = new ArrayList<>(byTarget().values());
    for (int i = 0; i < 8; i++) {
      mixed.add(groups.get(i % 3).get(i));
    }
    List<String> got =
        translator.translate(
            mixed.stream().map(Row::text).toList(), List.of("eng_Latn"), mixed.stream().map(Row::target).toList());
    assertEquals(mixed.stream().map(Row::translation).toList(), got);
  }

  @Test
  void unknownCodeIsAnErrorNamingTheInput() {
    var error = assertThrows(OrtException.class, () -> translator.translate(List.of("Hello."), "eng_Latn", "xx_Nope"));
    assertTrue(error.getMessage().contains("unknown target_language"), error.getMessage());
  }

  @Test
  void wrongNumberOfCodesIsRefused() {
    var error =
        assertThrows(
            IllegalArgumentException.class,
            () -> translator.translate(List.of("a", "b", "c"), List.of("eng_Latn"), List.of("fra_Latn", "deu_Latn")));
    assertTrue(error.getMessage().contains("one per text (3); got 2"), error.getMessage());
  }

  @Test
  void aFileWithoutLanguageInputsSaysSo() throws OrtException {
    Path unbaked = Path.of(System.getProperty("graphgen.languages")).resolveSibling("nllb.onnx");
    try (Translator plain = new Translator(unbaked)) {
      var error =
          assertThrows(IllegalArgumentException.class, () -> plain.translate(List.of("Hello."), "eng_Latn", "fra_Latn"));
      assertTrue(error.getMessage().contains("--keep-languages"), error.getMessage());
      assertEquals(1, plain.translate(List.of("Hello.")).size()); // its default languages
    }
  }
}
