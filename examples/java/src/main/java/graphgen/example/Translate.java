package graphgen.example;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * {@code Translate MODEL < input.txt}: one sentence per line in, one translation per line out, 16
 * lines per run.
 */
public final class Translate {
  /** Lines per run (as the C example's command line). */
  static final int BATCH = 16;

  private static final byte[] UTF8_BOM = {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF};

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: Translate MODEL.onnx < sentences.txt");
      System.exit(2);
    }
    List<String> lines;
    try {
      lines = inputLines(System.in.readAllBytes());
    } catch (IllegalArgumentException error) {
      System.err.println(error.getMessage());
      System.exit(1);
      return;
    }
    // BATCH lines per run: one run over a whole file would hold every line's search (4 beams each,
    // their caches) at once. Each batch is written before the next is translated.
    try (Translator translator = new Translator(Path.of(args[0]))) {
      for (int start = 0; start < lines.size(); start += BATCH) {
        translator.translate(lines.subList(start, Math.min(start + BATCH, lines.size())))
            .forEach(System.out::println);
        System.out.flush();
      }
    } catch (IllegalArgumentException error) {
      System.err.println(error.getMessage());
      System.exit(1);
    }
  }

  /**
   * The lines of the whole input {@code data}, read as graphgen's Python CLI ({@code graphgen
   * translate -i}) reads them, so that both give the same translations for the same file. A
   * {@code BufferedReader} would not: it silently replaces bytes that are not UTF-8 with U+FFFD
   * (the user never learns the input was damaged), ends a line at a lone {@code '\r'} too, and
   * keeps a byte order mark as the first line's first character (which changes its translation).
   *
   * <p>Lines end at {@code '\n'} only (a last line without one counts; input ending in {@code
   * '\n'} has no extra empty line); one {@code '\r'} at the end of a line is dropped (CRLF files);
   * a lone {@code '\r'}, a form feed, U+0085 or U+2028 stays inside its line. A UTF-8 byte order
   * mark at the very start of the input is removed (Windows editors write one); anywhere else it
   * stays.
   *
   * <p>A line that ends with U+0000 is refused here too, before anything is translated: {@link
   * Translator} would refuse it anyway ({@code text_utf8}'s rows are padded with zero bytes, so a
   * final U+0000 cannot be carried), but only when its batch is reached, after earlier batches were
   * written, and naming its place in the batch rather than its line. A U+0000 inside a line (before
   * other characters) is carried, so that line is kept.
   *
   * @throws IllegalArgumentException for the first line that is not valid UTF-8 or ends with
   *     U+0000, naming the line (from 1), and for bad UTF-8 the first bad byte with its offset in
   *     the line: {@code line 3: not valid UTF-8 (byte 0xff at offset 17)}, {@code line 2: ends with
   *     U+0000, which the file's bytes input cannot carry (its rows are padded with zero bytes);
   *     remove it}
   */
  static List<String> inputLines(byte[] data) {
    List<String> lines = new ArrayList<>();
    CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
        .onMalformedInput(CodingErrorAction.REPORT)
        .onUnmappableCharacter(CodingErrorAction.REPORT);
    int start = 0;
    while (start < data.length) {
      int newline = start;
      while (newline < data.length && data[newline] != '\n') {
        newline++;
      }
      int lineStart = start == 0 && startsWithBom(data) ? UTF8_BOM.length : start;
      int end = newline;
      if (end > lineStart && data[end - 1] == '\r') {
        end--;
      }
      int number = lines.size() + 1;
      String line = decode(decoder, data, lineStart, end, number);
      if (line.endsWith("\0")) {
        // worded as graphgen translate's per-line message (and Translator's, which names a batch index)
        throw new IllegalArgumentException(String.format(
            "line %d: ends with U+0000, which the file's bytes input cannot carry (its rows are padded"
                + " with zero bytes); remove it", number));
      }
      lines.add(line);
      start = newline + 1;
    }
    return lines;
  }

  private static boolean startsWithBom(byte[] data) {
    return data.length >= UTF8_BOM.length
        && Arrays.equals(data, 0, UTF8_BOM.length, UTF8_BOM, 0, UTF8_BOM.length);
  }

  private static String decode(CharsetDecoder decoder, byte[] data, int from, int to, int number) {
    ByteBuffer in = ByteBuffer.wrap(data, from, to - from);
    CharBuffer out = CharBuffer.allocate(to - from);  // UTF-8 never has more chars than bytes
    decoder.reset();
    CoderResult result = decoder.decode(in, out, true);
    if (!result.isError()) {
      result = decoder.flush(out);
    }
    if (result.isError()) {
      int at = in.position();  // the decoder stops at the start of the malformed sequence
      throw new IllegalArgumentException(String.format(
          "line %d: not valid UTF-8 (byte 0x%02x at offset %d)", number, data[at] & 0xFF, at - from));
    }
    return out.flip().toString();
  }
}
