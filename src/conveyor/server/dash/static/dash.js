// The dashboard's few behaviours. Everything works without them but the charts: a confirmation
// button waits for the typed name (the server checks it anyway), and a queue's charts are drawn.
"use strict";

function confirmByName(form) {
  const input = form.querySelector(`input[name="${form.dataset.field || "confirm"}"]`);
  const button = form.querySelector('button[type="submit"]');
  const sync = () => { button.disabled = input.value !== form.dataset.name; };
  input.addEventListener("input", sync);
  sync();
}

function drawCharts(box) {
  const charts = Array.from(box.querySelectorAll(".chart"));
  const plots = new Map();
  const styles = getComputedStyle(document.body);
  const stroke = getComputedStyle(document.querySelector("a") || document.body).color;
  async function refresh() {
    const response = await fetch(box.dataset.history, { credentials: "same-origin" });
    if (!response.ok) return;
    const rows = (await response.json()).history;
    const times = rows.map((r) => r.at_ms / 1000);
    for (const chart of charts) {
      const data = [times, rows.map((r) => r[chart.dataset.series])];
      const plot = plots.get(chart);
      if (plot) { plot.setData(data); continue; }
      const width = Math.max(280, chart.clientWidth || 320);
      plots.set(chart, new uPlot({
        width, height: 160, title: chart.dataset.label,
        axes: [{ stroke: styles.color }, { stroke: styles.color }],
        series: [{}, { label: chart.dataset.label, stroke, width: 2 }],
      }, data, chart));
    }
  }
  refresh();
  setInterval(refresh, 10000);
}

// A new filter or sort starts again at the first page (the rows' poll keeps the page shown).
function firstPageOnChange(form) {
  const page = form.querySelector('input[name="page"]');
  if (!page) return;
  const reset = (event) => { if (event.target !== page) page.value = "1"; };
  form.addEventListener("input", reset, true);
  form.addEventListener("change", reset, true);
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("form.filters").forEach(firstPageOnChange);
  document.querySelectorAll("form.confirm-by-name").forEach(confirmByName);
  const box = document.getElementById("charts");
  if (box && window.uPlot) drawCharts(box);
});
