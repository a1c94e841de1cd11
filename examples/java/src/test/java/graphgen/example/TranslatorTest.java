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
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The demo test set through the text-level file: the same strings as graphgen's Python path. */
class TranslatorTest {
  private static Translator translator;
  private static List<String> sources;
  private static List<String> expected;

  @BeforeAll
  static void load() throws IOException, OrtException {
    Path model = Path.of(System.getProperty("graphgen.model"));
    translator = new Translator(model);
    sources = new ArrayList<>();
    for (String line : Files.readAllLines(Path.of(System.getProperty("graphgen.sources")), StandardCharsets.UTF_8)) {
      sources.add(line.split("\t", 2)[0]);
    }
    expected = Files.readAllLines(Path.of(System.getProperty("graphgen.expected")), StandardCharsets.UTF_8);
    assertEquals(300, sources.size());
    assertEquals(sources.size(), expected.size());
  }

  @AfterAll
  static void close() throws OrtException {
    translator.close();
  }

  @Test
  void oneSentenceAtATime() throws OrtException {
    for (int i = 0; i < sources.size(); i++) {
      assertEquals(expected.get(i), translator.translate(List.of(sources.get(i))).get(0), sources.get(i));
    }
  }

  @Test
  void batchesOfSixteen() throws OrtException {
    List<String> got = new ArrayList<>();
    for (int start = 0; start < sources.size(); start += 16) {
      got.addAll(translator.translate(sources.subList(start, Math.min(start + 16, sources.size()))));
    }
    assertEquals(expected, got);
  }

  @Test
  void emptyBatchGivesNoTranslations() throws OrtException {
    assertTrue(translator.translate(List.of()).isEmpty());
  }

  @Test
  void missingModelIsAClearError() {
    var error = assertThrows(IllegalArgumentException.class, () -> new Translator(Path.of("no/such/model.onnx")));
    assertTrue(error.getMessage().contains("model file not found"), error.getMessage());
  }

  @Test
  void missingExtensionsLibraryIsAClearError() {
    Path model = Path.of(System.getProperty("graphgen.model"));
    var error =
        assertThrows(IllegalArgumentException.class, () -> new Translator(model, Path.of("no/libortextensions.so")));
    assertTrue(error.getMessage().contains("onnxruntime-extensions library not found"), error.getMessage());
  }
}
