package graphgen.example;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;

/** {@code Translate MODEL < input.txt}: one sentence per line in, one translation per line out. */
public final class Translate {
  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: Translate MODEL.onnx < sentences.txt");
      System.exit(2);
    }
    var reader = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    List<String> lines = reader.lines().toList();
    try (Translator translator = new Translator(Path.of(args[0]))) {
      translator.translate(lines).forEach(System.out::println);
    } catch (IllegalArgumentException error) {
      System.err.println(error.getMessage());
      System.exit(1);
    }
  }
}
