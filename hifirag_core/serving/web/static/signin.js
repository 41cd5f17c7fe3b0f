// Sign-in: the token goes once, in an Authorization header, to GET /session, which answers with an HttpOnly,
// SameSite=Strict cookie; the token itself is never put in a URL, and this script keeps no copy of it.
"use strict";
(function () {
  const form = document.getElementById("signin-form");
  const token = document.getElementById("token");
  const status = document.getElementById("status");

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.textContent = "Signing in…";
    status.dataset.state = "asking";
    try {
      const response = await fetch("/session", {
        headers: { Authorization: "Bearer " + token.value },
        credentials: "same-origin",
      });
      token.value = "";
      if (response.ok) {
        window.location.assign("/");
        return;
      }
      status.textContent = "That is not this service's token.";
    } catch (error) {
      status.textContent = "The service did not answer: " + error;
    }
    status.dataset.state = "error";
  });
})();
