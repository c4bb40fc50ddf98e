// The chat page in headless Chromium (Debian's), driven by playwright-core:
//   node test_page.cjs URL API_KEY SCREENSHOT.png [thinking]
// With the server's model: an answer streams into the DOM (seen growing) with live numbers,
// survives a reload, and Stop ends a long reply, keeping what came. With canned replies (the
// page's request answered by the test, so the text is known): markdown renders (a highlighted
// code block with a copy button, a list, a table, inline code) while every piece of HTML in
// the reply shows as text and runs nothing; Regenerate and Edit; a second conversation is
// made and the first is still there after a reload; rename, search, delete; Ctrl+Shift+O; at
// 390 px wide nothing overflows and the list opens as a drawer. Screenshots: SCREENSHOT and,
// beside it, -markdown.png and -narrow.png. With "thinking": the model thinks first, and its
// thinking must show collapsed, apart. Exits non-zero with the reasons on any failure.
const { chromium } = require("playwright-core");

const MARKDOWN = [
  "Here is a function:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\n",
  "Two points:\n\n- first, with `x = 1` inline\n- second\n\n",
  "| name | value |\n|---|---|\n| a | 1 |\n\n",
  "Raw HTML: <img src=x onerror=\"window.__pwned = 1\"> and <script>window.__pwned = 2</script>\n\n",
  "<div onclick=\"window.__pwned = 3\">a block of HTML</div>\n\n",
  "A [bad link](javascript:window.__pwned=4) and a [good one](https://example.org).",
].join("");

// A streamed /v1/chat/completions answer of `text`, a few characters a chunk.
function sse(text) {
  const pieces = text.match(/[\s\S]{1,7}/g);
  const event = (o) => `data: ${JSON.stringify(o)}\n\n`;
  return pieces.map((p) => event({ choices: [{ index: 0, delta: { content: p } }] })).join("") +
    event({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
            usage: { prompt_tokens: 9, completion_tokens: pieces.length, total_tokens: 9 + pieces.length } }) +
    "data: [DONE]\n\n";
}

// The page's everyday use, after its first real answer: canned markdown, Regenerate, Edit,
// conversations, Stop, the narrow layout, the licences.
async function everyday(page, { expect, count, lastReply, idle, question, shot }) {

  // Canned replies from here on, until the Stop check.
  let canned = MARKDOWN;
  await page.route("**/v1/chat/completions", (route) =>
    route.fulfill({ status: 200, contentType: "text/event-stream", body: sse(canned) }));
  const ask = async (text) => {
    await page.fill("#input", text);
    await page.press("#input", "Enter");
    await idle();
  };
  await ask("Show me some markdown.");
  const md = await page.evaluate(() => {
    const reply = document.querySelector(".message.assistant:last-of-type .text");
    return {
      code: reply.querySelector("pre code")?.textContent,
      highlighted: reply.querySelectorAll("pre code [class^='hljs-']").length,
      copy: reply.querySelectorAll(".code .copy-code").length,
      items: reply.querySelectorAll("ul > li").length,
      inline: [...reply.querySelectorAll("li code")].map((c) => c.textContent),
      cells: reply.querySelectorAll("table td").length,
      elements: document.querySelectorAll("#messages img, #messages script, #messages [onclick], #messages [onerror]").length,
      links: [...reply.querySelectorAll("a")].map((a) => a.getAttribute("href")),
      text: reply.textContent,
      pwned: window.__pwned,
    };
  });
  expect(md.code && md.code.includes("return a + b"), `no code block: ${JSON.stringify(md)}`);
  expect(md.highlighted > 0, "the code block is not highlighted");
  expect(md.copy === 1, "no copy button on the code block");
  expect(md.items === 2 && md.inline.includes("x = 1"), `list or inline code: ${JSON.stringify(md)}`);
  expect(md.cells === 2, `table: ${md.cells} cells`);
  expect(md.elements === 0 && md.pwned === undefined, `HTML from the reply ran: ${JSON.stringify(md)}`);
  expect(md.text.includes('<img src=x onerror="window.__pwned = 1">') && md.text.includes("<script>"),
    "the reply's HTML is not shown as text");
  expect(JSON.stringify(md.links) === '["https://example.org"]', `links: ${JSON.stringify(md.links)}`);
  await page.click(".message.assistant:last-of-type .copy-code");
  await page.waitForFunction(() =>
    document.querySelector(".message.assistant:last-of-type .copy-code").textContent === "Copied");
  await page.screenshot({ path: shot("markdown"), fullPage: true });

  canned = "A second answer.";
  await page.click(".message.assistant:last-of-type button:text('Regenerate')");
  await idle();
  expect((await lastReply()) === "A second answer." && (await count(".message")) === 4,
    "Regenerate did not replace the last reply");
  canned = "The answer to the edit.";
  await page.click(".message.user:nth-last-of-type(2) button:text('Edit')");
  await page.fill(".message.user .edit textarea", "An edited question.");
  await page.press(".message.user .edit textarea", "Enter");
  await idle();
  const turns = await page.$$eval(".message .text", (ts) => ts.map((t) => t.textContent.trim()));
  expect(turns.length === 4 && turns[2] === "An edited question." && turns[3] === "The answer to the edit.",
    `after Edit: ${JSON.stringify(turns)}`);
  const previous = await page.textContent("#stats");

  // A second conversation; the first is still there after a reload.
  await page.click("#new-chat");
  expect((await count(".message")) === 0, "New chat kept messages");
  canned = "Hello from the second chat.";
  await ask("Hello, second chat.");
  expect((await count("#chats li")) === 2, "the chat list does not hold two chats");
  await page.reload({ waitUntil: "load" });
  expect((await count("#chats li")) === 2, "after a reload the list does not hold two chats");
  expect((await count(".message")) === 2, "after a reload the second chat is not shown");
  await page.click(`#chats li:has-text("${question.slice(0, 20)}") .title`);
  expect((await count(".message")) === 4, "the first chat lost messages");
  // Rename (kept over a reload), search, delete.
  await page.click("#chats li.current .icon[title='Rename']");
  await page.fill("#chats li input", "Primary colours");
  await page.press("#chats li input", "Enter");
  await page.reload({ waitUntil: "load" });
  expect((await page.textContent("#chats li.current .title")) === "Primary colours", "the rename was not kept");
  await page.fill("#search", "second chat");
  expect((await count("#chats li")) === 1, "search did not filter the list");
  await page.fill("#search", "");
  await page.hover("#chats li:not(.current)");
  await page.click("#chats li:not(.current) .icon[title='Delete']");
  expect((await count("#chats li")) === 1, "delete did not remove the chat");
  await page.keyboard.press("Control+Shift+O");
  expect((await count(".message")) === 0 && (await count("#chats li")) === 2, "Ctrl+Shift+O made no new chat");

  // Stop ends a long reply from the model; what came is kept. The numbers shown at its start
  // are not the last reply's.
  await page.unroute("**/v1/chat/completions");
  await page.click("#toggle-settings");
  await page.fill("#max-tokens", "400");
  await page.fill("#temperature", "0");
  await page.click("#toggle-settings");
  await page.fill("#input", "Count from 1 to 300, one number a line, with nothing else.");
  await page.press("#input", "Enter");
  const first = await page.textContent("#stats");
  expect(first !== previous && /^waiting|tokens\/s/.test(first), `at the start of a reply: ${first}`);
  await page.waitForFunction(() =>
    (document.querySelector(".message.assistant:last-of-type .text")?.textContent.length || 0) > 20,
    null, { timeout: 120000 });
  expect((await page.getAttribute("body", "data-busy")) === "yes", "the reply ended before Stop");
  await page.click("#stop");
  await page.waitForFunction(() => document.body.dataset.busy === "no", null, { timeout: 5000 });
  const partial = await lastReply();
  expect(partial.length > 20 && !partial.includes("300") && (await count(".message.assistant")) === 1,
    `Stop lost the reply, or did not end it: ${JSON.stringify(partial.slice(-40))}`);
  await page.reload({ waitUntil: "load" });
  expect((await lastReply()) === partial, "the stopped reply was not kept");

  // 390 px wide: nothing wider than the screen; the list is a drawer.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(300); // the drawer's slide
  const narrow = await page.evaluate(() => ({
    width: document.documentElement.scrollWidth,
    sidebar: document.getElementById("sidebar").getBoundingClientRect().right,
  }));
  expect(narrow.width <= 390 && narrow.sidebar <= 0, `at 390 px: ${JSON.stringify(narrow)}`);
  await page.screenshot({ path: shot("narrow") });
  await page.click("#toggle-sidebar");
  await page.waitForTimeout(300);
  const open = await page.evaluate(() => document.getElementById("sidebar").getBoundingClientRect().left);
  expect(open === 0, `the drawer did not open (left ${open})`);

  const licenses = await page.evaluate(() => fetch("/licenses.txt").then((r) => r.text()));
  expect(licenses.includes("marked") && licenses.includes("highlight.js"), "no licences");
}

async function main() {
  const [url, key, screenshot, thinking] = process.argv.slice(2);
  const shot = (suffix) => screenshot.replace(/\.png$/, `-${suffix}.png`);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const problems = [];
  const expect = (ok, what) => { if (!ok) problems.push(what); };
  try {
    const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
    await context.addInitScript((k) => {
      if (!localStorage.getItem("kolibri-chat-api-key")) localStorage.setItem("kolibri-chat-api-key", k);
    }, key);
    const page = await context.newPage();
    page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("dialog", (d) => d.accept());
    await page.goto(url, { waitUntil: "load" });
    await page.waitForFunction(() => !document.getElementById("model").textContent.includes("…"));
    const model = await page.textContent("#model");
    expect(model.includes("qwen"), `model panel shows ${JSON.stringify(model)}`);
    const count = (sel) => page.$$eval(sel, (els) => els.length);
    const lastReply = async () => (await page.textContent(".message.assistant:last-of-type .text")).trim();
    const idle = () => page.waitForFunction(() => document.body.dataset.busy === "no", null, { timeout: 120000 });

    if (thinking) {
      // Settings under which the small test model answers after its (budgeted) thinking.
      await page.evaluate(() => {
        document.getElementById("system").value = "You are a terse assistant.";
        document.getElementById("temperature").value = "0";
      });
    }
    const question = thinking
      ? "Name three primary colors."
      : "Name the three primary colors in one short sentence.";
    await page.fill("#input", question);
    await page.press("#input", "Enter");
    // Sample the reply while it streams: its length must be seen growing, not only whole, and
    // the numbers must be this reply's.
    const lengths = new Set();
    const liveStats = new Set();
    const deadline = Date.now() + 120000;
    for (;;) {
      const state = await page.evaluate(() => {
        const reply = document.querySelector(".message.assistant:last-of-type");
        return { len: reply ? reply.textContent.length : 0, busy: document.body.dataset.busy,
                 stats: document.getElementById("stats").textContent };
      });
      if (state.busy === "yes") liveStats.add(state.stats);
      if (state.len > 0) lengths.add(state.len);
      if (state.busy === "no" && state.len > 0) break;
      if (Date.now() > deadline) throw new Error("no answer within 120 s");
      await page.waitForTimeout(15);
    }
    expect(lengths.size >= 2, `the answer did not stream (lengths seen: ${[...lengths]})`);
    expect([...liveStats].some((s) => /tokens\/s/.test(s)), `no live rate while streaming: ${[...liveStats]}`);
    const answer = await lastReply();
    expect(answer.trim(), "empty answer");
    const thought = () =>
      page.evaluate(() => {
        const d = document.querySelector(".message.assistant details.thinking");
        return d ? { open: d.open, text: d.querySelector(".thought").textContent } : null;
      });
    if (thinking) {
      const t = await thought();
      expect(t && t.text.trim() && !t.open, `thinking block: ${JSON.stringify(t)}`);
    } else {
      expect(!(await thought()), "a thinking block for a model that does not think");
    }
    const stats = await page.textContent("#stats");
    const STATS = /^\d+ tokens · [\d.]+ tokens\/s · first token after [\d.]+ s$/;
    expect(STATS.test(stats), `stats line: ${JSON.stringify(stats)}`);
    expect(STATS.test(await page.textContent(".message.assistant .meta")), "the reply keeps no numbers");
    await page.screenshot({ path: screenshot, fullPage: true });
    await page.reload({ waitUntil: "load" });
    expect((await count(".message")) === 2, "after a reload the two messages are not there");
    if (thinking) {
      expect(await thought(), "the thinking was not kept over a reload");
    } else {
      await everyday(page, { expect, count, lastReply, idle, question, shot });
    }
    console.log(`page: answer ${JSON.stringify(answer.slice(0, 80))}, ${lengths.size} lengths seen`);
  } finally {
    await browser.close();
  }
  if (problems.length) {
    console.error(problems.join("\n"));
    process.exit(1);
  }
  console.log("page: ok");
}

main().catch((e) => { console.error(e); process.exit(1); });
