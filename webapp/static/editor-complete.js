// Completion for the configuration editor, from the app's own JSON Schema (the one the
// server validates with): the keys allowed where the cursor is, and the values of keys
// with a fixed set (access_as, levels, types). Block-style YAML only; flow style
// (`{name: web}`) gets no suggestions, and nothing is ever inserted without a choice.
"use strict";

window.AgentwatchConfigCompletion = (function () {
  const KEY_LINE = /^(\s*)(- )?([A-Za-z_][\w-]*):(\s|$)/;

  function deref(schema, node) {
    for (let i = 0; node && node.$ref && i < 10; i++) {
      node = node.$ref.replace(/^#\//, "").split("/").reduce((n, k) => n && n[k], schema);
    }
    return node || null;
  }

  function schemaAt(schema, path) {
    let node = deref(schema, schema);
    for (const step of path) {
      if (!node) return null;
      node = deref(schema, step === "[]" ? node.items : (node.properties || {})[step]);
    }
    return node;
  }

  function indentOf(text) {
    return text.match(/^\s*/)[0].length;
  }

  // The keys (and "[]" for a list item) leading to the mapping that holds keys starting at
  // `column` on line `number` (or, with `itemDash`, to the list item whose dash is at that
  // column), read from the lines above by their indentation. Null when the lines above do
  // not say (flow style, a list at the root).
  function containerPath(doc, number, column, itemDash) {
    const path = itemDash === null ? [] : ["[]"];
    let limit = column;
    for (let n = number - 1; n >= 1; n--) {
      const text = doc.line(n).text;
      if (!text.trim() || /^\s*#/.test(text)) continue;
      const indent = indentOf(text);
      const key = text.match(KEY_LINE);
      const dash = /^\s*- /.test(text);
      if (itemDash !== null) {
        // The key that holds the list: deeper lines and the other items are skipped; the
        // key may sit at the dashes' own column.
        if (indent > itemDash || (dash && indent === itemDash)) continue;
        if (!key) return null;
        path.unshift(key[3]);
        if (dash) { path.unshift("[]"); itemDash = indent; continue; }
        itemDash = null;
        limit = indent;
        if (indent === 0) return path;
        continue;
      }
      const content = dash ? indent + 2 : indent;
      if (content > limit) continue;  // deeper
      if (content === limit) {  // a sibling key; on a dash line, our mapping is that item
        if (dash) { path.unshift("[]"); itemDash = indent; }
        continue;
      }
      if (!key) return null;  // a scalar or flow line where the holding key should be
      path.unshift(key[3]);
      if (dash) { path.unshift("[]"); itemDash = indent; continue; }
      limit = indent;
      if (indent === 0) return path;
    }
    return itemDash === null && limit === 0 ? path : null;
  }

  // Keys already written in the mapping that holds `column` on line `number`.
  function takenKeys(doc, number, column, startsItem) {
    const taken = new Set();
    const visit = (n) => {
      const text = doc.line(n).text;
      if (!text.trim() || /^\s*#/.test(text)) return true;
      const indent = indentOf(text);
      const dash = /^\s*- /.test(text);
      const content = dash ? indent + 2 : indent;
      if (content < column) return false;
      const key = text.match(KEY_LINE);
      if (content === column && key) taken.add(key[3]);
      // A dash at our column's item position starts this item (going up) or the next one.
      return !(dash && content === column);
    };
    if (!startsItem) for (let n = number - 1; n >= 1 && visit(n); n--);
    for (let n = number + 1; n <= doc.lines; n++) {
      const text = doc.line(n).text;
      if (/^\s*- /.test(text) && indentOf(text) + 2 === column) break;
      if (!visit(n)) break;
    }
    return taken;
  }

  function keyOptions(schema, node, taken) {
    if (!node || !node.properties) return [];
    return Object.entries(node.properties)
      .map(([name, spec]) => [name, deref(schema, spec) || {}])
      .filter(([name, spec]) => !spec.deprecated && !taken.has(name))
      .map(([name, spec]) => ({
        label: name, type: "property", info: spec.description || undefined,
        // A mapping or a list goes on the next lines; a value after a space.
        apply: name + ":" + (hasChildren(spec) ? "" : " "),
      }));
  }

  function hasChildren(spec) {
    const types = [].concat(spec.type || []);
    return types.includes("object") || types.includes("array");
  }

  function valueOptions(node) {
    if (!node) return [];
    const values = node.enum || (node.items && node.items.enum) || [];
    const types = [].concat(node.type || []);
    const all = values.map((v) => (v === null ? "null" : String(v)));
    if (types.includes("null") && !all.includes("null")) all.push("null");
    return all.map((v) => ({ label: v, type: "enum" }));
  }

  // A CodeMirror completion source, given the parsed schema.
  function source(schema) {
    return (context) => {
      const line = context.state.doc.lineAt(context.pos);
      const before = line.text.slice(0, context.pos - line.from);
      const doc = context.state.doc;
      let match = before.match(/^(\s*)(- )?([A-Za-z_][\w-]*):\s+([\w-]*)$/);
      if (match) {  // a value after `key: `
        const dash = match[2] ? match[1].length : null;
        const column = match[1].length + (match[2] ? 2 : 0);
        const path = containerPath(doc, line.number, column, dash);
        if (!path) return null;
        const options = valueOptions(schemaAt(schema, [...path, match[3]]));
        if (!options.length) return null;
        return { from: context.pos - match[4].length, options, validFor: /^[\w-]*$/ };
      }
      match = before.match(/^(\s*)(- )?([\w-]*)$/);
      if (!match || (!match[3] && !context.explicit && !match[2])) return null;
      const dash = match[2] ? match[1].length : null;
      const column = match[1].length + (match[2] ? 2 : 0);
      const path = containerPath(doc, line.number, column, dash);
      if (!path) return null;
      const node = schemaAt(schema, path);
      // `- ` in a list of names (levels, types) offers values; elsewhere, keys.
      const keys = keyOptions(schema, node, takenKeys(doc, line.number, column, dash !== null));
      const options = node && node.properties ? keys
        : (dash !== null ? valueOptions(schemaAt(schema, path.slice(0, -1))) : []);
      if (!options.length) return null;
      return { from: context.pos - match[3].length, options, validFor: /^[\w-]*$/ };
    };
  }

  return { source, containerPath, schemaAt };
})();
