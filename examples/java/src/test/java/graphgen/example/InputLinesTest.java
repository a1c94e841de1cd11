package graphgen.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code Translate}'s stdin lines: split, BOM and UTF-8 checks as {@code graphgen translate -i}. */
class InputLinesTest {
  private static List<String> lines(String text) {
    return Translate.inputLines(text.getBytes(StandardCharsets.UTF_8));
  }

  private static byte[] bytes(Object... parts) {
    var out = new ByteArrayOutputStream();
    for (Object part : parts) {
      if (part instanceof String text) {
        out.writeBytes(text.getBytes(StandardCharsets.UTF_8));
      } else {
        out.write((Integer) part);
      }
    }
    return out.toByteArray();
  }

  @Test
  void byteOrderMarkAtTheStartIsRemoved() {
    assertEquals(List.of(">>cmn_Hans<< Hi.", "Two."), lines("\uFEFF>>cmn_Hans<< Hi.\nTwo.\n"));
    assertEquals(List.of(""), lines("\uFEFF"));
    assertEquals(List.of("", "x"), lines("\uFEFF\r\nx"));
  }

  @Test
  void byteOrderMarkElsewhereStays() {
    assertEquals(List.of("a\uFEFF", "\uFEFFb"), lines("a\uFEFF\n\uFEFFb"));
    assertEquals(List.of("\uFEFFx"), lines("\uFEFF\uFEFFx"));  // only the first is removed
  }

  @Test
  void crlfLinesLoseTheirCarriageReturn() {
    assertEquals(List.of("one", "two"), lines("one\r\ntwo\r\n"));
    assertEquals(List.of("one\r", "two"), lines("one\r\r\ntwo\r"));  // one '\r' dropped per line
  }

  @Test
  void loneCarriageReturnAndOtherBreaksStayInsideTheLine() {
    assertEquals(List.of("a\rb"), lines("a\rb"));
    assertEquals(List.of("a\fb", "c\u2028d", "e\u0085f", "g\u2029h\u000Bi"),
        lines("a\fb\nc\u2028d\ne\u0085f\ng\u2029h\u000Bi\n"));
  }

  @Test
  void trailingNewline() {
    assertEquals(List.of("a", "b"), lines("a\nb"));
    assertEquals(List.of("a", "b"), lines("a\nb\n"));
    assertEquals(List.of("a", "b", ""), lines("a\nb\n\n"));
    assertEquals(List.of(""), lines("\n"));
    assertEquals(List.of("", "", "x"), lines("\n\nx"));
  }

  @Test
  void emptyInputGivesNoLines() {
    assertEquals(List.of(), Translate.inputLines(new byte[0]));
  }

  @Test
  void validMultibyteTextIsKept() {
    assertEquals(List.of("我有三只猫。", "😀 ok"), lines("我有三只猫。\r\n😀 ok"));
  }

  @Test
  void invalidUtf8IsRefusedWithLineAndOffset() {
    byte[] data = bytes("first\nsecond\r\n", "seventeen bytes: ", 0xFF, " rest\nlast\n");
    var error = assertThrows(IllegalArgumentException.class, () -> Translate.inputLines(data));
    assertEquals("line 3: not valid UTF-8 (byte 0xff at offset 17)", error.getMessage());
  }

  @Test
  void offsetIsThatOfTheFirstBadByte() {
    // A lead byte without its continuation: the lead byte is named (Python's error.start).
    assertMessage("line 1: not valid UTF-8 (byte 0xe4 at offset 2)", bytes("ab", 0xE4, "c"));
    // A sequence cut short by the end of the line (before the newline, or the '\r' of a CRLF).
    assertMessage("line 2: not valid UTF-8 (byte 0xe6 at offset 1)", bytes("ok\nx", 0xE6, 0x88, "\r\n"));
    // Overlong encodings and UTF-16 surrogates are not UTF-8 either.
    assertMessage("line 1: not valid UTF-8 (byte 0xc0 at offset 0)", bytes(0xC0, 0x80));
    assertMessage("line 1: not valid UTF-8 (byte 0xed at offset 3)", bytes("abc", 0xED, 0xA0, 0x80));
    // After a removed byte order mark the offset counts from the line's text.
    assertMessage("line 1: not valid UTF-8 (byte 0x80 at offset 1)", bytes("\uFEFFa", 0x80));
    // A stray continuation byte after a valid multibyte character.
    assertMessage("line 1: not valid UTF-8 (byte 0x80 at offset 3)", bytes("猫", 0x80));
  }

  /**
   * A line ending with U+0000 is refused by its number before anything is translated ({@code
   * text_utf8}'s zero padding cannot carry it); one with U+0000 before other characters is kept.
   */
  @Test
  void aLineEndingWithU0000IsRefusedNamingIt() {
    String why = "ends with U+0000, which the file's bytes input cannot carry (its rows are padded with zero"
        + " bytes); remove it";
    assertMessage("line 2: " + why, bytes("I have three cats.\n", "cats\0\n", "a\0b\n"));
    // The CRLF's '\r' is dropped first, so the U+0000 before it ends the line.
    assertMessage("line 2: " + why, bytes("ok\r\n", "cats\0\r\n", "next\r\n"));
    // A last line without a newline counts too.
    assertMessage("line 3: " + why, bytes("one\n", "two\n", "three\0"));
    assertMessage("line 1: " + why, bytes("\0"));
    // The first bad line is named, whichever way it is bad.
    assertMessage("line 1: " + why, bytes("x\0\n", 0xFF, "\n"));
    assertMessage("line 1: not valid UTF-8 (byte 0xff at offset 0)", bytes(0xFF, "\n", "x\0\n"));
  }

  @Test
  void aU0000InsideALineIsKept() {
    assertEquals(List.of("I have three cats.", "a\0b", "\0\0c"), lines("I have three cats.\na\0b\n\0\0c\n"));
    assertEquals(List.of("a\0\r"), lines("a\0\r\r\n"));  // one '\r' dropped: the line ends with '\r'
  }

  private static void assertMessage(String expected, byte[] data) {
    var error = assertThrows(IllegalArgumentException.class, () -> Translate.inputLines(data));
    assertEquals(expected, error.getMessage());
  }
}
