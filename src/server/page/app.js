// The chat page: conversations with the server's model, streamed from /v1/chat/completions
// and kept in this browser's localStorage. Replies render as markdown (marked, highlight.js:
// compiled into the server, see page.rs) with every piece of HTML in them shown as text.
"use strict";

const $ = (id) => document.getElementById(id);
const STORE = "kolibri-chats";
const CURRENT = "kolibri-chats-current";
// The page kept one conversation here before it kept several: it becomes the first chat.
const LEGACY = "kolibri-chat";
// Each setting is saved as `${LEGACY}-${id}`.
const SETTINGS = ["system", "temperature", "top-p", "top-k", "min-p", "seed", "max-tokens",
  "json-mode", "api-key"];

let chats = []; // [{id, title, renamed, updated, messages: [{role, content, reasoning_content?, stats?}]}]
let current = null;
let controller = null;

// ---- storage ------------------------------------------------------------------------------

function loadChats() {
  const raw = localStorage.getItem(STORE);
  try {
    chats = raw ? JSON.parse(raw).chats : [];
    if (!Array.isArray(chats)) throw new Error("no chat list");
  } catch (e) {
    // Unreadable: kept aside under another key, never overwritten.
    localStorage.setItem(`${STORE}-unreadable-${Date.now()}`, raw);
    chats = [];
    note(`Saved chats could not be read (${e.message}); they were kept aside.`);
  }
  const legacy = localStorage.getItem(LEGACY);
  if (legacy) {
    try {
      const messages = JSON.parse(legacy);
      if (Array.isArray(messages) && messages.length) chats.push(newChat(messages));
      localStorage.removeItem(LEGACY);
    } catch {
      // Left where it is.
    }
  }
  current = chats.find((c) => c.id === localStorage.getItem(CURRENT)) || chats[0] || null;
}

function saveChats() {
  try {
    localStorage.setItem(STORE, JSON.stringify({ version: 1, chats }));
    if (current) localStorage.setItem(CURRENT, current.id);
  } catch (e) {
    note(`Could not save the chats: ${e.message}`);
  }
}

function newChat(messages = []) {
  const id = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const chat = { id, title: "New chat", renamed: false, updated: Date.now(), messages };
  retitle(chat);
  return chat;
}

// A chat is named after its first question until the user renames it.
function retitle(chat) {
  if (chat.renamed) return;
  const first = chat.messages.find((m) => m.role === "user");
  chat.title = first ? first.content.replace(/\s+/g, " ").trim().slice(0, 60) : "New chat";
}

function touch(chat) {
  chat.updated = Date.now();
  retitle(chat);
  saveChats();
  renderChatList();
}

// ---- markdown -----------------------------------------------------------------------------

const escapeHtml = (s) =>
  String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

// Links only to the web, mail or this page: never javascript: or data: URLs.
const safeUrl = (href) => /^(https?:|mailto:|#|\/(?!\/))/i.test(href || "");

const markdown = typeof marked === "undefined" ? null : new marked.Marked({
  gfm: true,
  breaks: true,
  renderer: {
    // HTML in a reply is text to show, not markup to run.
    html({ text }) {
      return escapeHtml(text);
    },
    code({ text, lang }) {
      const language = (lang || "").trim().split(/\s+/)[0].toLowerCase();
      let body = escapeHtml(text);
      if (typeof hljs !== "undefined" && language && hljs.getLanguage(language)) {
        try {
          body = hljs.highlight(text, { language, ignoreIllegals: true }).value;
        } catch {
          // Shown plain.
        }
      }
      return `<div class="code"><div class="code-bar"><span>${escapeHtml(language || "text")}</span>` +
        `<button type="button" class="copy-code">Copy</button></div>` +
        `<pre><code class="hljs">${body}</code></pre></div>`;
    },
    link({ href, title, tokens }) {
      const text = this.parser.parseInline(tokens);
      if (!safeUrl(href)) return text;
      const t = title ? ` title="${escapeHtml(title)}"` : "";
      return `<a href="${escapeHtml(href)}"${t} target="_blank" rel="noopener noreferrer nofollow">${text}</a>`;
    },
    // Images are not fetched: a link to them at most.
    image({ href, text }) {
      const alt = escapeHtml(text || "image");
      return safeUrl(href) ? `<a href="${escapeHtml(href)}" target="_blank" rel="noopener noreferrer nofollow">[${alt}]</a>` : `[${alt}]`;
    },
  },
});

function renderMarkdown(el, text) {
  if (markdown) {
    el.innerHTML = markdown.parse(text);
  } else {
    el.textContent = text;
  }
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // Not a secure context (a LAN address): the older way.
    const area = document.createElement("textarea");
    area.value = text;
    document.body.appendChild(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
}

function flash(button, text) {
  const was = button.textContent;
  button.textContent = text;
  setTimeout(() => (button.textContent = was), 1200);
}

// ---- the conversation ---------------------------------------------------------------------

function note(text) {
  $("stats").textContent = text;
}

function renderMessages() {
  $("messages").replaceChildren();
  const messages = current ? current.messages : [];
  messages.forEach((m, i) => showMessage(m, i));
  $("messages").lastElementChild?.scrollIntoView({ block: "end" });
}

function button(label, onClick, title) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  if (title) b.title = title;
  b.addEventListener("click", onClick);
  return b;
}

// One message: its text, then its actions (and a reply's numbers).
function showMessage(m, index) {
  const div = document.createElement("div");
  div.className = `message ${m.role}`;
  const text = document.createElement("div");
  text.className = "text";
  div.appendChild(text);
  if (m.role === "assistant") {
    text.classList.add("markdown");
    renderMarkdown(text, m.content);
    if (m.reasoning_content) thinkingOf(div).textContent = m.reasoning_content;
  } else {
    text.textContent = m.content;
  }
  const actions = document.createElement("div");
  actions.className = "actions";
  if (m.role === "assistant") {
    if (m.stats) {
      const meta = document.createElement("span");
      meta.className = "meta";
      meta.textContent = statsLine(m.stats);
      actions.appendChild(meta);
    }
    actions.appendChild(button("Copy", (e) => copyText(m.content).then(() => flash(e.target, "Copied"))));
    if (index === current.messages.length - 1) {
      actions.appendChild(button("Regenerate", regenerate, "Answer again"));
    }
  } else if (m.role === "user") {
    actions.appendChild(button("Edit", () => editTurn(div, index), "Edit and send again"));
  }
  if (index !== undefined) div.appendChild(actions);
  $("messages").appendChild(div);
  return div;
}

// The collapsed "Thinking" block of a reply (made on first use), for its reasoning_content.
function thinkingOf(div) {
  let thought = div.querySelector(".thought");
  if (!thought) {
    const details = document.createElement("details");
    details.className = "thinking";
    const summary = document.createElement("summary");
    summary.textContent = "Thinking";
    thought = document.createElement("div");
    thought.className = "thought";
    details.append(summary, thought);
    div.prepend(details);
  }
  return thought;
}

// Editing turn `index`: what follows it goes, and the model answers the edited text.
function editTurn(div, index) {
  if (controller) return;
  const text = div.querySelector(".text");
  const form = document.createElement("form");
  form.className = "edit";
  const area = document.createElement("textarea");
  area.value = current.messages[index].content;
  area.rows = Math.min(12, area.value.split("\n").length + 1);
  const save = document.createElement("button");
  save.type = "submit";
  save.textContent = "Send";
  const cancel = button("Cancel", () => renderMessages());
  form.append(area, save, cancel);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const edited = area.value.trim();
    if (!edited) return;
    current.messages = current.messages.slice(0, index);
    current.messages.push({ role: "user", content: edited });
    touch(current);
    renderMessages();
    generate();
  });
  area.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      form.requestSubmit();
    } else if (e.key === "Escape") {
      renderMessages();
    }
  });
  text.replaceWith(form);
  div.querySelector(".actions")?.remove();
  area.focus();
}

function regenerate() {
  if (controller || !current) return;
  if (current.messages.at(-1)?.role === "assistant") current.messages.pop();
  touch(current);
  renderMessages();
  generate();
}

// ---- the chat list ------------------------------------------------------------------------

function renderChatList() {
  const query = $("search").value.trim().toLowerCase();
  const matches = (c) => !query || c.title.toLowerCase().includes(query) ||
    c.messages.some((m) => m.content.toLowerCase().includes(query));
  const items = chats
    .filter(matches)
    .sort((a, b) => b.updated - a.updated)
    .map((chat) => {
      const li = document.createElement("li");
      li.dataset.id = chat.id;
      if (chat === current) li.className = "current";
      const title = button(chat.title, () => openChat(chat));
      title.className = "title";
      title.title = chat.title;
      const rename = button("✎", () => renameChat(li, chat), "Rename");
      const remove = button("×", () => deleteChat(chat), "Delete");
      rename.className = remove.className = "icon";
      li.append(title, rename, remove);
      return li;
    });
  $("chats").replaceChildren(...items);
}

function openChat(chat) {
  controller?.abort();
  current = chat;
  saveChats();
  renderChatList();
  renderMessages();
  note("");
  closeSidebar();
  $("input").focus();
}

function startChat() {
  controller?.abort();
  // An empty chat is reused rather than a second one made.
  const empty = chats.find((c) => c.messages.length === 0);
  current = empty || newChat();
  if (!empty) chats.push(current);
  saveChats();
  openChat(current);
}

function renameChat(li, chat) {
  const input = document.createElement("input");
  input.value = chat.title;
  input.setAttribute("aria-label", "Chat name");
  const done = (keep) => {
    const name = input.value.trim();
    if (keep && name) {
      chat.title = name;
      chat.renamed = true;
      saveChats();
    }
    renderChatList();
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") done(true);
    if (e.key === "Escape") done(false);
  });
  input.addEventListener("blur", () => done(true));
  li.replaceChildren(input);
  input.select();
}

function deleteChat(chat) {
  if (!confirm(`Delete "${chat.title}"?`)) return;
  if (chat === current) controller?.abort();
  chats = chats.filter((c) => c !== chat);
  if (chat === current) current = chats.sort((a, b) => b.updated - a.updated)[0] || null;
  saveChats();
  renderChatList();
  renderMessages();
}

function closeSidebar() {
  $("sidebar").classList.remove("open");
  $("shade").hidden = true;
  $("toggle-sidebar").setAttribute("aria-expanded", "false");
}

// ---- generation ---------------------------------------------------------------------------

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    if (!r.ok) throw new Error(r.status === 401 ? "API key needed (Settings)" : `HTTP ${r.status}`);
    const body = await r.json();
    $("model").textContent = body.data.map((m) => m.id).join(", ");
  } catch (e) {
    $("model").textContent = `model unknown: ${e.message}`;
  }
}

// Reads server-sent events from the response body, calling onData for each `data:` payload.
async function readEvents(response, onData) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (line.startsWith("data: ")) onData(line.slice(6));
      }
    }
  }
}

// The request's sampling settings: only those given.
function sampling() {
  const number = (id) => {
    const v = $(id).value.trim();
    return v === "" || Number.isNaN(Number(v)) ? undefined : Number(v);
  };
  const body = {
    temperature: number("temperature"),
    top_p: number("top-p"),
    top_k: number("top-k"),
    min_p: number("min-p"),
    seed: number("seed"),
    max_tokens: number("max-tokens"),
  };
  if ($("json-mode").checked) body.response_format = { type: "json_object" };
  return body;
}

function statsLine(s) {
  const parts = [`${s.tokens} tokens`];
  if (s.tokens_per_s) parts.push(`${s.tokens_per_s.toFixed(1)} tokens/s`);
  if (s.ttft_s !== undefined) parts.push(`first token after ${s.ttft_s.toFixed(2)} s`);
  return parts.join(" · ");
}

// The numbers of the reply being written: tokens, their rate since the first, and the wait for
// the first.
function replyStats(started) {
  let first = null;
  let tokens = 0;
  return {
    token() {
      tokens += 1;
      if (first === null) first = performance.now();
    },
    now(finalTokens) {
      const n = finalTokens ?? tokens;
      if (first === null) return { tokens: n };
      const secs = (performance.now() - first) / 1000;
      return {
        tokens: n,
        tokens_per_s: n > 1 && secs > 0 ? (n - 1) / secs : 0,
        ttft_s: (first - started) / 1000,
      };
    },
  };
}

async function send(text) {
  if (!current) {
    current = newChat();
    chats.push(current);
  }
  current.messages.push({ role: "user", content: text });
  touch(current);
  showMessage(current.messages.at(-1), current.messages.length - 1);
  await generate();
}

// Streams the model's answer to the current chat into a new reply.
async function generate() {
  const chat = current;
  const reply = showMessage({ role: "assistant", content: "" });
  const answer = reply.querySelector(".text");
  reply.classList.add("streaming");
  reply.scrollIntoView({ block: "end" });
  const system = $("system").value.trim();
  const messages = (system ? [{ role: "system", content: system }] : [])
    .concat(chat.messages.map(({ role, content }) => ({ role, content })));
  controller = new AbortController();
  setBusy(true);
  const started = performance.now();
  const stats = replyStats(started);
  note("waiting for the first token…");
  let text = "";
  let thought = "";
  let usage = null;
  let drawing = false;
  let failure = null;
  let finished = false;
  const draw = () => {
    drawing = false;
    if (finished) return;
    renderMarkdown(answer, text);
    note(statsLine(stats.now()));
    reply.scrollIntoView({ block: "end" });
  };
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(),
      signal: controller.signal,
      body: JSON.stringify({
        messages,
        stream: true,
        stream_options: { include_usage: true },
        ...sampling(),
      }),
    });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      throw new Error(body.error?.message || `HTTP ${r.status}`);
    }
    await readEvents(r, (data) => {
      if (data === "[DONE]") return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      const delta = chunk.choices?.[0]?.delta;
      if (!delta?.content && !delta?.reasoning_content) return;
      stats.token();
      if (delta.reasoning_content) {
        thought += delta.reasoning_content;
        thinkingOf(reply).textContent = thought;
      }
      if (delta.content) text += delta.content;
      if (!drawing) {
        drawing = true;
        requestAnimationFrame(draw);
      }
    });
  } catch (e) {
    if (e.name !== "AbortError") failure = `Error: ${e.message}`;
  } finally {
    controller = null;
    finished = true;
    const final = stats.now(usage?.completion_tokens);
    if (text || thought) {
      const turn = { role: "assistant", content: text, stats: final };
      if (thought) turn.reasoning_content = thought;
      chat.messages.push(turn);
      touch(chat);
    }
    note(text || thought ? statsLine(final) : "");
    // Drawn again from the chat: the reply with its actions, the one before without its
    // Regenerate button.
    if (chat === current) renderMessages();
    if (failure) showMessage({ role: "error", content: failure });
    setBusy(false);
  }
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").hidden = !busy;
  document.body.dataset.busy = busy ? "yes" : "no";
}

// ---- keys and start -----------------------------------------------------------------------

function shortcuts(e) {
  const mod = e.ctrlKey || e.metaKey;
  const typing = ["INPUT", "TEXTAREA"].includes(document.activeElement?.tagName);
  if (e.key === "Escape" && controller) {
    controller.abort();
  } else if (mod && e.shiftKey && e.key.toLowerCase() === "o") {
    e.preventDefault();
    startChat();
  } else if (mod && e.key.toLowerCase() === "k") {
    e.preventDefault();
    $("sidebar").classList.add("open");
    $("search").focus();
  } else if (e.key === "/" && !typing) {
    e.preventDefault();
    $("input").focus();
  }
}

function init() {
  for (const id of SETTINGS) {
    const el = $(id);
    const saved = localStorage.getItem(`${LEGACY}-${id}`);
    const checkbox = el.type === "checkbox";
    if (saved !== null) {
      if (checkbox) el.checked = saved === "true";
      else el.value = saved;
    }
    el.addEventListener("change", () =>
      localStorage.setItem(`${LEGACY}-${id}`, checkbox ? String(el.checked) : el.value));
  }
  loadChats();
  renderChatList();
  renderMessages();
  loadModel();
  setBusy(false);
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("input").value.trim();
    if (!text || controller) return;
    $("input").value = "";
    send(text);
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("composer").requestSubmit();
    } else if (e.key === "ArrowUp" && !$("input").value && current && !controller) {
      const last = current.messages.map((m) => m.role).lastIndexOf("user");
      const div = $("messages").children[last];
      if (div) {
        e.preventDefault();
        editTurn(div, last);
      }
    }
  });
  $("stop").addEventListener("click", () => controller?.abort());
  $("new-chat").addEventListener("click", startChat);
  $("search").addEventListener("input", renderChatList);
  $("messages").addEventListener("click", (e) => {
    const copy = e.target.closest(".copy-code");
    if (copy) copyText(copy.closest(".code").querySelector("code").textContent).then(() => flash(copy, "Copied"));
  });
  $("toggle-settings").addEventListener("click", (e) => {
    const panel = $("settings");
    panel.hidden = !panel.hidden;
    e.target.setAttribute("aria-expanded", String(!panel.hidden));
  });
  $("toggle-sidebar").addEventListener("click", () => {
    const open = $("sidebar").classList.toggle("open");
    $("shade").hidden = !open;
    $("toggle-sidebar").setAttribute("aria-expanded", String(open));
  });
  $("shade").addEventListener("click", closeSidebar);
  $("api-key").addEventListener("change", loadModel);
  document.addEventListener("keydown", shortcuts);
}

init();
