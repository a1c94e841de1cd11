// Beam search from Node.js with a graphgen id-level file: one session.run, ids in, ids out.
//
// The same code runs on onnxruntime-node (native) and onnxruntime-web (WebAssembly): pass either
// module as `ort`. The id-level file needs no onnxruntime-extensions (which neither package can
// load); tokenize with the model's SentencePiece tokenizer on your side.

import { access } from "node:fs/promises";

/** Open an id-level graphgen file with the given ONNX Runtime module. */
export async function openModel(ort, path) {
  try {
    await access(path);
  } catch {
    throw new Error(`model file not found: ${path}`);
  }
  let session;
  try {
    session = await ort.InferenceSession.create(path, { logSeverityLevel: 3 });
  } catch (error) {
    if (/SentencepieceTokenizer|ai\.onnx\.contrib/.test(String(error))) {
      throw new Error(
        `${path} is a text-level file: its tokenizer needs onnxruntime-extensions, which this runtime ` +
          "cannot load; export it with `graphgen export --no-tokenizer` instead",
      );
    }
    throw error;
  }
  return session;
}

/**
 * Translate one padded batch of token ids.
 *
 * @param inputIds rows of int ids, right-padded to one length
 * @param attentionMask 1 for a real token, 0 for padding, same shape
 * @returns sequences[batch][hypothesis][position], as the graph's `sequences` output
 */
export async function generate(ort, session, inputIds, attentionMask) {
  if (inputIds.length === 0) {
    return [];
  }
  const width = inputIds[0].length;
  if (inputIds.some((row) => row.length !== width) || attentionMask.some((row) => row.length !== width)) {
    throw new Error("inputIds and attentionMask rows must all have the same length");
  }
  const dims = [inputIds.length, width];
  const feeds = {
    input_ids: new ort.Tensor("int32", Int32Array.from(inputIds.flat()), dims),
    attention_mask: new ort.Tensor("int32", Int32Array.from(attentionMask.flat()), dims),
  };
  const { sequences } = await session.run(feeds, ["sequences"]);
  const [batch, returned, length] = sequences.dims;
  const data = Array.from(sequences.data);
  return Array.from({ length: batch }, (_, b) =>
    Array.from({ length: returned }, (_, r) => data.slice((b * returned + r) * length, (b * returned + r + 1) * length)),
  );
}
