// The chat page in headless Chromium (Debian's), driven by playwright-core:
//   node test_page.cjs URL API_KEY SCREENSHOT.png
// It loads with no console error, a typed question gets an answer that streams into the
// DOM (the text is seen growing), the conversation survives a reload, and a screenshot is
// saved. Exits non-zero with the reason on any failure.
const { chromium } = require("playwright-core");

async function main() {
  // With "thinking": the model thinks first; its thinking must show collapsed, apart.
  const [url, key, screenshot, thinking] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const problems = [];
  try {
    const context = await browser.newContext();
    await context.addInitScript((k) => localStorage.setItem("kolibri-chat-api-key", k), key);
    const page = await context.newPage();
    page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    await page.goto(url, { waitUntil: "load" });
    await page.waitForFunction(() => !document.getElementById("model").textContent.includes("…"));
    const model = await page.textContent("#model");
    if (!model.includes("qwen")) problems.push(`model panel shows ${JSON.stringify(model)}`);
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
    // Sample the reply's length while it streams: it must be seen growing, not only whole.
    const lengths = new Set();
    const deadline = Date.now() + 120000;
    for (;;) {
      const state = await page.evaluate(() => {
        const reply = document.querySelector(".message.assistant:last-of-type");
        return { len: reply ? reply.textContent.length : 0, busy: document.body.dataset.busy };
      });
      if (state.len > 0) lengths.add(state.len);
      if (state.busy === "no" && state.len > 0) break;
      if (Date.now() > deadline) throw new Error("no answer within 120 s");
      await page.waitForTimeout(15);
    }
    if (lengths.size < 2) problems.push(`the answer did not stream (lengths seen: ${[...lengths]})`);
    const answer = await page.textContent(".message.assistant .text");
    if (!answer.trim()) problems.push("empty answer");
    const thought = () =>
      page.evaluate(() => {
        const d = document.querySelector(".message.assistant details.thinking");
        return d ? { open: d.open, text: d.querySelector(".thought").textContent } : null;
      });
    if (thinking) {
      const t = await thought();
      if (!t || !t.text.trim() || t.open) problems.push(`thinking block: ${JSON.stringify(t)}`);
    } else if (await thought()) {
      problems.push("a thinking block for a model that does not think");
    }
    const status = await page.textContent("#status");
    if (!/tokens in/.test(status)) problems.push(`status line: ${JSON.stringify(status)}`);
    await page.screenshot({ path: screenshot, fullPage: true });
    await page.reload({ waitUntil: "load" });
    const kept = await page.$$eval(".message", (ms) => ms.map((m) => m.className));
    if (kept.length !== 2) problems.push(`after a reload ${kept.length} messages, not 2`);
    if (thinking && !(await thought())) problems.push("the thinking was not kept over a reload");
    await page.click("#new-chat");
    if ((await page.$$(".message")).length !== 0) problems.push("New chat kept messages");
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
