package graphgen.example;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code Translate}'s command line on the demo file: stdin lines in, translations out. */
class CommandLineTest {
  /**
   * 40 demo sentences (more than two runs of {@link Translate#BATCH}) as a Windows editor saves
   * them, a byte order mark first and CRLF endings: the demo set's translations, in order.
   */
  @Test
  void linesInBatchesGiveThePythonPathsTranslations() throws Exception {
    List<String> sources = new ArrayList<>();
    for (String line : Files.readAllLines(Path.of(System.getProperty("graphgen.sources")), StandardCharsets.UTF_8)) {
      sources.add(line.split("\t", 2)[0]);
    }
    List<String> expected =
        Files.readAllLines(Path.of(System.getProperty("graphgen.expected")), StandardCharsets.UTF_8);
    String input = "\uFEFF" + String.join("\r\n", sources.subList(0, 40)) + "\r\n";
    InputStream stdin = System.in;
    PrintStream stdout = System.out;
    var captured = new ByteArrayOutputStream();
    try {
      System.setIn(new ByteArrayInputStream(input.getBytes(StandardCharsets.UTF_8)));
      System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
      Translate.main(new String[] {System.getProperty("graphgen.model")});
    } finally {
      System.setIn(stdin);
      System.setOut(stdout);
    }
    String want = String.join(System.lineSeparator(), expected.subList(0, 40)) + System.lineSeparator();
    assertEquals(want, captured.toString(StandardCharsets.UTF_8));
  }
}
