// The pages' proof of work (docs: reference/http.md#proof-of-work): ask a door's
// challenge, solve it in a Web Worker (pow-worker.js, named by this script's
// data-worker), and give the solution to send. progress(tried, expected) is told as
// it goes.
"use strict";
window.flashsaleWork = (() => {
  const worker = document.currentScript.dataset.worker;
  // Resolves to "<challenge>:<nonce>", or null when the door asks no work.
  async function solve(url, csrf, progress) {
    const r = await fetch(url, {method: "POST", headers: {"X-CSRFToken": csrf}});
    if (!r.ok) throw new Error(`${r.status}: no challenge from ${url}`);
    const challenge = await r.json();
    if (challenge.bits <= 0) return null;
    const expected = 2 ** challenge.bits;
    progress(0, expected);
    return new Promise((resolve, reject) => {
      const solver = new Worker(worker);
      solver.onmessage = (event) => {
        progress(event.data.tried, expected);
        if (event.data.solution !== undefined) { solver.terminate(); resolve(event.data.solution); }
      };
      solver.onerror = (event) => { solver.terminate(); reject(new Error(event.message)); };
      solver.postMessage({challenge: challenge.challenge, bits: challenge.bits});
    });
  }
  // A form that needs a new buyer's work: solved as it is sent, the solution in its
  // challenge_solution field, `shown` saying how far it is.
  function guard(form, csrf, shown) {
    form.addEventListener("submit", async (event) => {
      if (form.elements.challenge_solution.value) return;
      event.preventDefault();
      const button = form.querySelector("button[type=submit]");
      button.disabled = true;
      try {
        const solution = await solve("/api/buyers/challenge", csrf, (tried, expected) => {
          shown.textContent = `proof of work: ${Math.min(99, Math.floor(100 * tried / expected))}%`;
        });
        form.elements.challenge_solution.value = solution || "";
        shown.textContent = "proof of work: done";
        form.submit();
      } catch (e) {
        shown.textContent = `proof of work failed: ${e.message}`;
        button.disabled = false;
      }
    });
  }
  return {solve, guard};
})();
