// The chat page: a conversation with the server's model, streamed from
// /v1/chat/completions and kept in this browser's localStorage. No external resources.
"use strict";

const $ = (id) => document.getElementById(id);
const STORE = "kolibri-chat";
const SETTINGS = ["system", "temperature", "max-tokens", "api-key"];
let conversation = [];
let controller = null;

function load() {
  try {
    conversation = JSON.parse(localStorage.getItem(STORE) || "[]");
  } catch {
    conversation = [];
  }
  for (const id of SETTINGS) {
    const saved = localStorage.getItem(`${STORE}-${id}`);
    if (saved !== null) $(id).value = saved;
    $(id).addEventListener("change", () => localStorage.setItem(`${STORE}-${id}`, $(id).value));
  }
  conversation.forEach((m) => {
    const div = show(m.role, m.content);
    if (m.reasoning_content) thinkingOf(div).textContent = m.reasoning_content;
  });
}

function save() {
  localStorage.setItem(STORE, JSON.stringify(conversation));
}

// A message: its text in a span of its own, so that a reply's thinking can sit before it.
function show(role, text) {
  const div = document.createElement("div");
  div.className = `message ${role}`;
  const body = document.createElement("span");
  body.className = "text";
  body.textContent = text;
  div.appendChild(body);
  $("messages").appendChild(div);
  div.scrollIntoView({ block: "end" });
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

async function send(text) {
  conversation.push({ role: "user", content: text });
  save();
  show("user", text);
  const reply = show("assistant", "");
  const answer = reply.querySelector(".text");
  reply.classList.add("streaming");
  const system = $("system").value.trim();
  const messages = (system ? [{ role: "system", content: system }] : []).concat(conversation);
  controller = new AbortController();
  setBusy(true);
  const started = performance.now();
  let tokens = 0;
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(),
      signal: controller.signal,
      body: JSON.stringify({
        messages,
        stream: true,
        stream_options: { include_usage: true },
        temperature: Number($("temperature").value),
        max_tokens: Number($("max-tokens").value),
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
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
      const delta = chunk.choices?.[0]?.delta;
      if (delta?.reasoning_content) {
        thinkingOf(reply).textContent += delta.reasoning_content;
      }
      if (delta?.content) answer.textContent += delta.content;
      if (delta?.content || delta?.reasoning_content) reply.scrollIntoView({ block: "end" });
    });
    const secs = (performance.now() - started) / 1000;
    $("status").textContent = `${tokens} tokens in ${secs.toFixed(1)} s`;
  } catch (e) {
    if (e.name !== "AbortError") show("error", `Error: ${e.message}`);
  } finally {
    reply.classList.remove("streaming");
    const thought = reply.querySelector(".thought")?.textContent;
    if (answer.textContent || thought) {
      const turn = { role: "assistant", content: answer.textContent };
      if (thought) turn.reasoning_content = thought;
      conversation.push(turn);
      save();
    } else {
      reply.remove();
    }
    controller = null;
    setBusy(false);
  }
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").hidden = !busy;
  document.body.dataset.busy = busy ? "yes" : "no";
}

function init() {
  load();
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
    }
  });
  $("stop").addEventListener("click", () => controller?.abort());
  $("new-chat").addEventListener("click", () => {
    controller?.abort();
    conversation = [];
    save();
    $("messages").replaceChildren();
    $("status").textContent = "";
  });
  $("toggle-settings").addEventListener("click", (e) => {
    const panel = $("settings");
    panel.hidden = !panel.hidden;
    e.target.setAttribute("aria-expanded", String(!panel.hidden));
  });
  $("api-key").addEventListener("change", loadModel);
}

init();
