// parse.mjs FILE... - parses each file as one Mermaid diagram with
// mermaid's own parser (the one a docs site renders with), under jsdom,
// and prints one line per file: "ok <file> <diagram type>" or
// "error <file> <first line of the parser's message>". Exits 1 when any
// file does not parse.
import { readFileSync } from 'node:fs';
import { JSDOM } from 'jsdom';

const dom = new JSDOM('<!DOCTYPE html><body></body>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import('mermaid');
mermaid.initialize({ startOnLoad: false });

let failed = false;
for (const file of process.argv.slice(2)) {
  try {
    const r = await mermaid.parse(readFileSync(file, 'utf8'));
    console.log(`ok ${file} ${r.diagramType}`);
  } catch (e) {
    failed = true;
    console.log(`error ${file} ${String(e.message ?? e).split('\n').slice(0, 2).join(' ')}`);
  }
}
process.exit(failed ? 1 : 0);
