// The ask view: POST the question to /run and show its stream as it arrives. Every piece of text from the
// stream is set with textContent, never as HTML: page titles and answers may hold anything.
"use strict";
(function () {
  const SEPARATOR = "|||---|||";
  const form = document.getElementById("ask-form");
  const question = document.getElementById("question");
  const button = document.getElementById("ask-button");
  const status = document.getElementById("status");
  const steps = document.getElementById("steps");
  const answer = document.getElementById("answer");
  const citations = document.getElementById("citations");
  const inspect = document.getElementById("inspect");

  function setStatus(text, kind) {
    status.textContent = text;
    status.dataset.state = kind;
  }

  function show(message) {
    const shown = (message.intermediate_steps || "").split(SEPARATOR).filter((s) => s.trim());
    while (steps.children.length > shown.length) steps.lastChild.remove();
    shown.forEach((step, i) => {
      const text = step.replace(/\*\*/g, "").trim();
      if (i < steps.children.length) {
        if (steps.children[i].textContent !== text) steps.children[i].textContent = text;
      } else {
        const li = document.createElement("li");
        li.textContent = text;
        steps.appendChild(li);
      }
    });
    if (message.final_report) answer.textContent = message.final_report;
    if (message.complete) {
      citations.replaceChildren(...(message.citations || []).map((url) => {
        const li = document.createElement("li");
        li.textContent = url;
        return li;
      }));
    }
  }

  async function ask(text) {
    steps.replaceChildren();
    answer.textContent = "";
    citations.replaceChildren();
    inspect.classList.add("hidden");
    setStatus("Asking…", "asking");
    button.disabled = true;
    try {
      const response = await fetch("/run", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ question: text }),
      });
      if (!response.ok || !response.body) {
        let why = response.statusText;
        try { why = (await response.json()).error || why; } catch (e) { /* not JSON */ }
        setStatus(`The service said ${response.status}: ${why}`, "error");
        return;
      }
      const runId = response.headers.get("X-HiFiRAG-Run-Id");
      const questionId = response.headers.get("X-HiFiRAG-Question-Id");  // already percent-encoded
      setStatus("Answering: steps appear as each stage finishes…", "streaming");
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let last = null;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = event.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
          if (!data) continue;
          last = JSON.parse(data);
          show(last);
        }
      }
      if (last && last.complete && !last.error) {
        setStatus("Complete.", "complete");
        if (runId && questionId) {
          inspect.href = `/runs/${encodeURIComponent(runId)}/answers/${questionId}`;
          inspect.classList.remove("hidden");
        }
      } else {
        setStatus(last && last.error ? last.error : "The stream ended before the answer was complete.", "error");
      }
    } catch (err) {
      setStatus(`The stream failed: ${err}`, "error");
    } finally {
      button.disabled = false;
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = question.value.trim();
    if (text) ask(text);
  });
})();
