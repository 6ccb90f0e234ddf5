/** The edit rules shared by State, Store, Filesystem and Context Hub (`performStringReplacement`). */

/** Returns `[newContent, occurrences]`, or an error message. */
export function performStringReplacement(
  content: string,
  oldString: string,
  newString: string,
  replaceAll: boolean,
): [string, number] | string {
  if (content === "" && oldString === "") return [newString, 0];
  if (oldString === "") return "Error: oldString cannot be empty when file has content";
  const parts = content.split(oldString);
  const occurrences = parts.length - 1;
  if (occurrences === 0) return `Error: String not found in file: '${oldString}'`;
  if (occurrences > 1 && !replaceAll) {
    return `Error: String '${oldString}' has multiple occurrences (appears ${occurrences} times) in file. Use replace_all=True to replace all instances, or provide a more specific string with surrounding context.`;
  }
  return [parts.join(newString), occurrences];
}
