// The ask view: POST the question (and its steering) to /run and show its stream as it arrives. The page asks
// for the rendered stream ("render": "html"): each message also carries its steps and its answer as HTML that
// the server rendered from Markdown with raw HTML off and sanitised with an allow-list
// (hifirag_core/serving/rendering.py), the same renderer as the inspector's. Only that HTML is set as HTML;
// every other text (errors, URLs) is set with textContent. The page's CSP would refuse to run anything anyway.
//
// Follow-up turns: once an answer is complete, the Follow up box under it asks a question that names it
// ("follows": its answer id, from the X-HiFiRAG-Answer-Id header); the answered turn moves into the Thread list
// above (its nodes moved, never parsed again) and the new turn streams in its place. The Ask button starts a new
// thread. An answer page's Follow up box opens this page with the thread so far and its follows (data-follows).
"use strict";
(function () {
  const SEPARATOR = "|||---|||";
  const form = document.getElementById("ask-form");
  const question = document.getElementById("question");
  const button = document.getElementById("ask-button");
  const status = document.getElementById("status");
  const steps = document.getElementById("steps");
  const answer = document.getElementById("answer");
  const inspect = document.getElementById("inspect");
  const problems = document.getElementById("problems");
  const thread = document.getElementById("thread");
  const turns = document.getElementById("turns");
  const asked = document.getElementById("asked");
  const followForm = document.getElementById("follow-up-form");
  const followText = document.getElementById("follow-up");
  const followButton = document.getElementById("follow-up-button");
  // the answer a follow-up names: the latest complete answer of this page, or the one the page opened on
  let latest = followForm.dataset.follows ? { answerId: followForm.dataset.follows } : null;
  const LISTS = ["sites", "exclude_sites"];
  const TEXTS = ["after", "before", "language", "length"];

  // The steering fields filled in, as the API takes them (an empty field: the service's own setting).
  function steering() {
    const body = {};
    for (const name of [...LISTS, ...TEXTS]) {
      const value = document.getElementById(name).value.trim();
      if (value) body[name] = value;  // sites: one comma-separated string, which the API splits
    }
    const depth = document.getElementById("depth").value.trim();
    // a whole number as a number; anything else as typed, for the API to say what is wrong with it
    if (depth) body.depth = /^[+-]?\d+$/.test(depth) ? Number(depth) : depth;
    return body;
  }

  function setStatus(text, kind) {
    status.textContent = text;
    status.dataset.state = kind;
  }

  function show(message) {
    const shown = message.steps_html || [];
    while (steps.children.length > shown.length) steps.lastChild.remove();
    shown.forEach((html, i) => {
      if (i < steps.children.length) {
        if (steps.children[i].dataset.html !== html) {
          steps.children[i].innerHTML = html;
          steps.children[i].dataset.html = html;
        }
      } else {
        const li = document.createElement("li");
        li.className = "markdown";
        li.innerHTML = html;
        li.dataset.html = html;
        steps.appendChild(li);
      }
    });
    if (message.final_report) answer.innerHTML = message.final_report_html;
  }

  // The Runs table as the server renders it now: the service run counts an answer before its stream completes.
  async function refreshRuns() {
    try {
      const response = await fetch("/", { headers: { Accept: "text/html" } });
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html").getElementById("runs");
      const runs = document.getElementById("runs");
      if (fresh && runs) runs.replaceWith(document.adoptNode(fresh));
    } catch (e) { /* the table stays as it was; a reload shows it */ }
  }


  // The answered turn on show, moved into the Thread list (its question, answer nodes and inspect link).
  function keepTurn(turn) {
    const li = document.createElement("li");
    li.className = "turn";
    const q = document.createElement("p");
    q.className = "turn-question";
    q.textContent = turn.question;
    const a = document.createElement("div");
    a.className = "answer-text markdown";
    a.replaceChildren(...answer.childNodes);
    li.append(q, a);
    if (turn.inspect) {
      const p = document.createElement("p");
      p.className = "meta";
      const link = document.createElement("a");
      link.href = turn.inspect;
      link.textContent = "inspect this turn";
      p.appendChild(link);
      li.appendChild(p);
    }
    turns.appendChild(li);
    thread.classList.remove("hidden");
  }

  async function ask(text, follows) {
    steps.replaceChildren();
    answer.replaceChildren();
    problems.replaceChildren();
    inspect.classList.add("hidden");
    followForm.classList.add("hidden");
    asked.textContent = follows ? `Follow-up: ${text}` : text;
    asked.classList.remove("hidden");
    setStatus("Asking…", "asking");
    button.disabled = true;
    followButton.disabled = true;
    let done = null;
    try {
      const response = await fetch("/run", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ question: text, render: "html", ...steering(), ...(follows ? { follows } : {}) }),
      });
      if (!response.ok || !response.body) {
        let why = response.statusText;
        let detail = [];
        try {
          const body = await response.json();
          why = body.error || why;
          detail = body.detail || [];
        } catch (e) { /* not JSON */ }
        setStatus(detail.length ? `The service refused the request (${response.status}); what to change:`
          : `The service said ${response.status}: ${why}`, "error");
        problems.replaceChildren(...detail.map((text) => {
          const li = document.createElement("li");
          li.textContent = text;
          return li;
        }));
        return;
      }
      const runId = response.headers.get("X-HiFiRAG-Run-Id");
      const questionId = response.headers.get("X-HiFiRAG-Question-Id");  // already percent-encoded
      const answerId = response.headers.get("X-HiFiRAG-Answer-Id");  // percent-encoded, its slash kept
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
      await refreshRuns();  // before the status says so, so that "Complete." finds the table current
      if (last && last.complete && !last.error) {
        setStatus("Complete.", "complete");
        done = { question: text, answerId: answerId ? decodeURIComponent(answerId) : null, inspect: null };
        if (runId && questionId) {
          inspect.href = `/runs/${encodeURIComponent(runId)}/answers/${questionId}`;
          inspect.classList.remove("hidden");
          done.inspect = inspect.href;
        }
      } else {
        setStatus(last && last.error ? last.error : "The stream ended before the answer was complete.", "error");
      }
    } catch (err) {
      setStatus(`The stream failed: ${err}`, "error");
    } finally {
      button.disabled = false;
      followButton.disabled = false;
      if (done && done.answerId) {  // the answer can be followed up
        latest = done;
        followText.value = "";
        followForm.classList.remove("hidden");
      } else if (latest) {  // a follow-up that failed can be sent again
        followForm.classList.remove("hidden");
      }
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    turns.replaceChildren();  // a new question starts a new thread
    thread.classList.add("hidden");
    latest = null;
    ask(question.value, null);  // an empty question too: the API's 422 says what to send
  });

  followForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = followText.value.trim();
    if (!text || !latest) return;
    if (latest.question) {  // an answer of this page moves up (once); one the page opened on is there already
      keepTurn(latest);
      latest = { answerId: latest.answerId };
    }
    ask(text, latest.answerId);
  });
})();
