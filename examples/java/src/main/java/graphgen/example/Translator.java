package graphgen.example;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtLoggingLevel;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.extensions.OrtxPackage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A graphgen text-level file, loaded once: strings in, translations out, one {@code session.run}.
 *
 * <p>The tokenizer, the search and the detokenizer are all inside the file; the only extra piece is
 * the onnxruntime-extensions library (its SentencePiece op), which the Maven artifact ships. A
 * session may be used from several threads at once.
 */
public final class Translator implements AutoCloseable {
  private final OrtEnvironment env = OrtEnvironment.getEnvironment();
  private final OrtSession session;

  /** Loads {@code model} with the extensions library from the onnxruntime-extensions artifact. */
  public Translator(Path model) throws OrtException {
    this(model, Path.of(OrtxPackage.getLibraryPath()));
  }

  /** Loads {@code model} with the extensions library at {@code extensionsLibrary}. */
  public Translator(Path model, Path extensionsLibrary) throws OrtException {
    if (!Files.isRegularFile(model)) {
      throw new IllegalArgumentException("model file not found: " + model);
    }
    if (!Files.isRegularFile(extensionsLibrary)) {
      throw new IllegalArgumentException(
          "onnxruntime-extensions library not found: " + extensionsLibrary
              + " (the text-level file needs it for its SentencePiece op)");
    }
    try (OrtSession.SessionOptions options = new OrtSession.SessionOptions()) {
      options.setSessionLogLevel(OrtLoggingLevel.ORT_LOGGING_LEVEL_ERROR); // not the notice per optional input
      options.registerCustomOpLibrary(extensionsLibrary.toString());
      session = env.createSession(model.toString(), options);
    }
  }

  /** One translation per input, in order; an empty list gives an empty list. */
  public List<String> translate(List<String> texts) throws OrtException {
    if (texts.isEmpty()) {
      return List.of();
    }
    String[] batch = texts.toArray(new String[0]);
    try (OnnxTensor input = OnnxTensor.createTensor(env, batch, new long[] {batch.length});
        OrtSession.Result result = session.run(Map.of("text", input), java.util.Set.of("translation"))) {
      // [batch, num_return_sequences]: the best hypothesis of each input is column 0.
      String[][] translations = (String[][]) result.get(0).getValue();
      List<String> best = new ArrayList<>(translations.length);
      for (String[] row : translations) {
        best.add(row[0]);
      }
      return best;
    }
  }

  @Override
  public void close() throws OrtException {
    session.close();
  }
}
