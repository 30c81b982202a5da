/** Never echo what the client sent beyond a short, printable excerpt. */
export const excerpt = (text: string) => (text.length > 120 ? `${text.slice(0, 120)}…` : text).replace(/[^\x20-\x7e]/g, "?");
