// A plain rendering of /asyncapi.json (AsyncAPI 3.0): info, servers, channels, operations,
// messages and every schema, each schema as collapsible JSON. Nothing is fetched from elsewhere.
"use strict";

function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

function section(root, title) {
  root.append(el("h2", title, { id: title.toLowerCase() }));
  return root;
}

function jsonBlock(name, value, open) {
  const details = el("details", undefined, open ? { open: "" } : {});
  details.append(el("summary", name), el("pre", JSON.stringify(value, null, 2)));
  return details;
}

// A file of Sparkwire's source the description names (docs/extensions.md): not served by this
// server, so it is named as such, and the part of this page that describes the same is linked.
const SOURCE_FILE = /\b(docs\/[\w./-]+\.md)\b/g;

function described(text) {
  const block = el("pre");
  let at = 0;
  for (const match of text.matchAll(SOURCE_FILE)) {
    block.append(text.slice(at, match.index));
    const file = el("code", match[1], { class: "source-file", title: "a file in Sparkwire's source repository" });
    const note = el("span", " (in Sparkwire's source repository, not served here; the messages it describes are under ");
    note.append(el("a", "Messages", { href: "#messages" }), " below)");
    block.append(file, note);
    at = match.index + match[0].length;
  }
  block.append(text.slice(at));
  return block;
}

async function render() {
  const root = document.getElementById("doc");
  let doc;
  try {
    const answer = await fetch("/asyncapi.json");
    if (!answer.ok) throw new Error(`GET /asyncapi.json: ${answer.status}`);
    doc = await answer.json();
  } catch (err) {
    document.getElementById("status").textContent = `could not load the AsyncAPI document: ${err.message}`;
    return;
  }
  root.replaceChildren();
  root.append(el("h1", `${doc.info.title} ${doc.info.version}`, { id: "title" }));
  root.append(el("p", `AsyncAPI ${doc.asyncapi}, ${doc.defaultContentType || ""}`));
  root.append(described(doc.info.description || ""));
  section(root, "Servers");
  for (const [name, server] of Object.entries(doc.servers || {})) {
    root.append(el("p", `${name}: ${server.protocol}://${server.host} (${server.description || ""})`));
  }
  section(root, "Channels");
  for (const [name, channel] of Object.entries(doc.channels || {})) {
    const item = el("div", undefined, { class: "channel" });
    item.append(el("h3", `${name}: ${channel.address}`), el("p", channel.title || ""));
    item.append(el("p", `messages: ${Object.keys(channel.messages || {}).join(", ")}`));
    root.append(item);
  }
  section(root, "Operations");
  for (const [name, op] of Object.entries(doc.operations || {})) {
    root.append(el("p", `${name} (${op.action}): ${op.summary || ""}`, { class: "operation" }));
  }
  section(root, "Messages");
  for (const [name, message] of Object.entries(doc.components.messages || {})) {
    root.append(jsonBlock(name, message, true));
  }
  section(root, "Schemas");
  for (const [name, schema] of Object.entries(doc.components.schemas || {})) {
    root.append(jsonBlock(name, schema, false));
  }
}

render();
