// The report's charts, drawn from its own data as the page loads (charts.js before it).
"use strict";

(() => {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const draw = () => {
    for (const box of document.querySelectorAll(".chart-box")) {
      const name = box.id.slice("chart-".length);
      const label = box.closest("section").querySelector("h2").textContent;
      if (box.dataset.kind === "line") {
        Charts.line(box, data[name], label, (s) => `+${Charts.clock(s)}`);
      } else {
        Charts[box.dataset.kind](box, data[name], label);
      }
    }
  };
  draw();
  let pending = null;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(draw, 100);
  });
})();
