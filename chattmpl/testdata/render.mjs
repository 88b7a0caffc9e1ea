// render.mjs renders chat templates with @huggingface/jinja, the
// implementation transformers.js uses, as the reference the chattmpl
// tests compare against byte for byte.
//
// Usage: node render.mjs INSTALL_DIR < corpus.json > rendered.json
//
// INSTALL_DIR is the directory whose node_modules holds @huggingface/jinja
// (scripts/llamacpp/install.sh installs it with node-llama-cpp). The
// corpus is {"templates": {NAME: TEXT}, "cases": [{"template": NAME,
// "vars": {...}, "now": "YYYY-MM-DDTHH:MM:SSZ"}]}; the answer is one
// {"out": TEXT} or {"error": MESSAGE} per case, in order.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const dir = process.argv[2];
const { Template, Environment } = await import(pathToFileURL(join(dir, "node_modules", "@huggingface", "jinja", "dist", "index.js")).href);
const corpus = JSON.parse(readFileSync(0, "utf8"));

// strftime_now reads a fixed clock so that both sides render the same
// date; the formats are those the Go side implements.
function fixedStrftime(now) {
	const d = new Date(now);
	const pad2 = (n) => (n < 10 ? "0" + n : String(n));
	const months = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
	return (format) =>
		format.replace(/%[YmdbBHM%]/g, (t) => {
			switch (t) {
				case "%Y": return String(d.getUTCFullYear());
				case "%m": return pad2(d.getUTCMonth() + 1);
				case "%d": return pad2(d.getUTCDate());
				case "%b": return months[d.getUTCMonth()].slice(0, 3);
				case "%B": return months[d.getUTCMonth()];
				case "%H": return pad2(d.getUTCHours());
				case "%M": return pad2(d.getUTCMinutes());
				default: return "%";
			}
		});
}

// The library declares strftime_now itself (with the real clock) and
// refuses to redeclare a global, so its declaration is redirected to the
// case's fixed clock; everything else is the library's own.
let clock = null;
const declare = Environment.prototype.set;
Environment.prototype.set = function (name, value) {
	return declare.call(this, name, name === "strftime_now" ? clock : value);
};

function render(template, c) {
	clock = fixedStrftime(c.now);
	return template.render(c.vars);
}

const parsed = {};
const out = [];
for (const c of corpus.cases) {
	try {
		if (!(c.template in parsed)) {
			parsed[c.template] = new Template(corpus.templates[c.template]);
		}
		out.push({ out: render(parsed[c.template], c) });
	} catch (e) {
		out.push({ error: String(e && e.message ? e.message : e) });
	}
}
process.stdout.write(JSON.stringify(out));
