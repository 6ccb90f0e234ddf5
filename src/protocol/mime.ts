/**
 * The MIME table of deepagents 1.14.1. Unknown and missing extensions are text/plain, so
 * source files of any kind read as text. (The `mime-types` database is not used here: it
 * maps `.ts` to video/mp2t and would turn every TypeScript file binary.)
 */
const BINARY_OR_SPECIFIC: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  svg: "image/svg+xml",
  heic: "image/heic",
  heif: "image/heif",
  mp3: "audio/mpeg",
  wav: "audio/wav",
  aiff: "audio/aiff",
  aac: "audio/aac",
  ogg: "audio/ogg",
  flac: "audio/flac",
  mp4: "video/mp4",
  webm: "video/webm",
  mpeg: "video/mpeg",
  mov: "video/quicktime",
  avi: "video/x-msvideo",
  flv: "video/x-flv",
  mpg: "video/mpeg",
  wmv: "video/x-ms-wmv",
  "3gpp": "video/3gpp",
  pdf: "application/pdf",
  ppt: "application/vnd.ms-powerpoint",
  pptx: "application/vnd.openxmlformats-officedocument.presentationml.presentation",
  md: "text/markdown",
  markdown: "text/markdown",
  html: "text/html",
  htm: "text/html",
  css: "text/css",
  csv: "text/csv",
  xml: "text/xml",
  json: "application/json",
  js: "application/javascript",
  mjs: "application/javascript",
  cjs: "application/javascript",
};

/** The lower-cased extension of the basename; dotfiles such as `.env` have none. */
function extensionOf(filePath: string): string {
  const base = filePath.slice(filePath.lastIndexOf("/") + 1);
  const dot = base.lastIndexOf(".");
  return dot <= 0 ? "" : base.slice(dot + 1).toLowerCase();
}

export function getMimeType(filePath: string): string {
  return BINARY_OR_SPECIFIC[extensionOf(filePath)] ?? "text/plain";
}

export function isTextMimeType(mimeType: string): boolean {
  return (
    mimeType.startsWith("text/") ||
    mimeType === "application/json" ||
    mimeType === "application/javascript" ||
    mimeType === "image/svg+xml"
  );
}
