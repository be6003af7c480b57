// patterncnn report: the layer x head grid, its task and pattern switches, and each head's example maps.
// Everything it needs is in the page (#report-data); it makes no request.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var state = { task: data.task_order[0], pattern: "majority", layer: null, head: null };
  var tip = document.getElementById("tip");

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function pct(x) { return (100 * x).toFixed(1) + "%"; }

  function rgba(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + ((n >> 16) & 255) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a.toFixed(3) + ")";
  }

  function buttons(holder, values, key, label) {
    holder.textContent = "";
    holder.appendChild(el("span", { "class": "note" }, label + " "));
    values.forEach(function (v) {
      var b = el("button", { type: "button", "data-value": v }, v);
      if (state[key] === v) { b.className = "on"; }
      b.addEventListener("click", function () { state[key] = v; render(); });
      holder.appendChild(b);
    });
  }

  function cellColour(cell) {
    var name = state.pattern === "majority" ? cell.majority : state.pattern;
    var share = state.pattern === "majority" ? cell.majority_share : cell.shares[name];
    return { colour: data.colors[name], alpha: Math.max(0.06, share), share: share, name: name };
  }

  function renderGrid() {
    var grid = data.tasks[state.task].heads;
    var table = document.getElementById("grid");
    table.textContent = "";
    var head = el("tr");
    head.appendChild(el("th", {}, "L\\H"));
    for (var h = 0; h < data.heads; h++) { head.appendChild(el("th", {}, String(h))); }
    table.appendChild(head);
    grid.forEach(function (row, l) {
      var tr = el("tr");
      tr.appendChild(el("th", {}, String(l)));
      row.forEach(function (cell, h) {
        var c = cellColour(cell);
        var majority = state.pattern === "majority";
        var tie = majority && cell.tied ? "*" : (majority && cell.clear === false ? "?" : "");
        var td = el("td", { "class": "cell", tabindex: "0", role: "button", "data-layer": String(l), "data-head": String(h),
                             title: "layer " + l + ", head " + h + ": " + c.name + " " + pct(c.share) +
                                    (majority && cell.ci ? " (95% over the examples: " + pct(cell.ci[0]) + " to " +
                                     pct(cell.ci[1]) + ")" : "") +
                                    (tie === "*" ? " (a tie: " + cell.tied.join(", ") + ")" :
                                     tie === "?" ? " (other examples could give it another majority)" : "") });
        td.style.background = rgba(c.colour, 0.1 + 0.9 * c.alpha);
        td.style.color = c.alpha > 0.5 ? "#fff" : "#222";
        td.textContent = data.short[c.name] + tie + " " + Math.round(100 * c.share);
        if (state.layer === l && state.head === h) { td.className += " selected"; }
        td.addEventListener("click", function () { select(l, h); });
        td.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { select(l, h); } });
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
  }

  function select(l, h) { state.layer = l; state.head = h; render(); }

  function hover(img, item) {
    img.addEventListener("mousemove", function (ev) {
      var t = item.tokens.length;
      if (!t) { return; }
      var r = img.getBoundingClientRect();
      var col = Math.min(t - 1, Math.max(0, Math.floor((ev.clientX - r.left) / r.width * t)));
      var row = Math.min(t - 1, Math.max(0, Math.floor((ev.clientY - r.top) / r.height * t)));
      tip.textContent = "query " + row + " " + item.tokens[row] + "  \u2192  key " + col + " " + item.tokens[col];
      tip.style.left = (ev.clientX + 14) + "px";
      tip.style.top = (ev.clientY + 12) + "px";
      tip.style.display = "block";
    });
    img.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  }

  function renderDetail() {
    var box = document.getElementById("detail");
    box.textContent = "";
    if (state.layer === null) {
      box.appendChild(el("p", { "class": "note" }, "Click a head in the grid to see its shares and example maps."));
      return;
    }
    var l = state.layer, h = state.head, key = l + "," + h;
    box.appendChild(el("h3", {}, "Layer " + l + ", head " + h));
    data.task_order.forEach(function (task) {
      var cell = data.tasks[task].heads[l][h];
      var parts = data.labels.map(function (n) { return n + " " + pct(cell.shares[n]); });
      box.appendChild(el("div", { "class": "shares-row" }, task + ": " + parts.join(", ")));
    });
    (data.extras || []).forEach(function (x) {
      var v = x.values[l][h];
      if (v !== null && v !== undefined) { box.appendChild(el("div", { "class": "shares-row" }, x.label + ": " + v)); }
    });
    var items = data.thumbs[key] || [];
    if (!items.length) {
      box.appendChild(el("p", { "class": "note" }, "No example maps were kept for this head (a census from before "
                                                   + "patterncnn kept them)."));
      return;
    }
    data.labels.forEach(function (name) {
      var mine = items.filter(function (it) { return it.label === name; });
      if (!mine.length) { return; }
      box.appendChild(el("div", { "class": "shares-row" }, name + ": the maps the classifier was surest of"));
      var row = el("div", { "class": "thumbs" });
      mine.forEach(function (it) {
        var fig = el("div", { "class": "thumb" });
        var img = el("img", { "class": "thumb-img", src: it.src, alt: name + " map, " + it.task + " example " + it.example,
                              title: it.tokens.join(" ") });
        hover(img, it);
        fig.appendChild(img);
        fig.appendChild(el("div", { "class": "cap" }, it.task + "\u00a0#" + it.example + ", p\u00a0" +
                                                      it.prob.toFixed(2) + ", T\u00a0" + it.tokens.length));
        row.appendChild(fig);
      });
      box.appendChild(row);
    });
  }

  function render() {
    buttons(document.getElementById("task-buttons"), data.task_order, "task", "task:");
    buttons(document.getElementById("pattern-buttons"), ["majority"].concat(data.labels), "pattern", "colour by:");
    renderGrid();
    renderDetail();
  }

  render();
}());
