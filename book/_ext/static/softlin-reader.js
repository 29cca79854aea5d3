/* softlin book: small reading aids on every page (book/_ext/book_site.py adds this script).
   1. A click anywhere on a solution's title bar opens or closes it (sphinx-exercise makes most of the
      title a link back to the exercise, which scrolled away and left the solution closed).
   2. A click or tap on a figure opens it full size in an overlay that scrolls (pinch-zoom works too);
      a click, Escape or the close button closes it.
   3. A display equation wider than its column is scaled down to fit, to at least 70 % of its size;
      beyond that it scrolls sideways inside its own box (the CSS gives it overflow-x: auto). A printed
      output wider than the column gets a smaller font (to 75 %), then wrapped lines; a table (columns
      aligned by spaces) shrinks to 60 %, then on a phone scrolls sideways in its own box.
   4. Whatever scrolls sideways in its own box (a formula wider than its line or column, a table on a
      phone) is marked softlin-scrolls: book_site.css fades it out at each edge with more behind it.
   5. In print, a printed table gets a font small enough that no column wraps (softlinFitPrint).
   6. An exercise whose answer is a number or a few numbers gets a box under its check cell, so that a
      reader of the site, with no kernel, can check an answer: the cell's output carries a hash of the
      key rounded as the exercise asks (softlin.book.widgets.answer_box), not the key, and the box says
      whether the numbers typed round to the same digits; a wrong answer is told what the notebook's
      check would say where a hash can tell (wrong sign, twice or half, right to fewer digits) and the
      exercise's hint. */
(function () {
  "use strict";

  function solutionTitles() {
    document.querySelectorAll(".solution.dropdown > .admonition-title").forEach(function (title) {
      title.querySelectorAll("a").forEach(function (a) {
        a.addEventListener("click", function (event) {
          if (a.classList.contains("headerlink")) return;
          // Not a jump back to the exercise: the title bar's own toggle handler opens the solution
          // (it reads the clicked element, so the click is handed to the title itself).
          event.preventDefault();
          event.stopPropagation();
          title.click();
        });
      });
    });
  }

  function overlay(img) {
    var box = document.createElement("div");
    box.className = "softlin-lightbox";
    box.setAttribute("role", "dialog");
    box.setAttribute("aria-label", "Figure at full size");
    var close = document.createElement("button");
    close.className = "softlin-lightbox-close";
    close.type = "button";
    close.textContent = "\u00d7";
    close.setAttribute("aria-label", "Close");
    var big = document.createElement("img");
    big.src = img.currentSrc || img.src;
    big.alt = img.alt || "";
    box.appendChild(close);
    box.appendChild(big);
    function shut() {
      box.remove();
      document.removeEventListener("keydown", onKey);
      img.focus && img.focus();
    }
    function onKey(event) { if (event.key === "Escape") shut(); }
    box.addEventListener("click", function (event) { if (event.target !== big) shut(); });
    big.addEventListener("click", shut);
    document.addEventListener("keydown", onKey);
    document.body.appendChild(box);
    close.focus();
  }

  function figures() {
    document.querySelectorAll("main figure img, main .cell_output img").forEach(function (img) {
      if (img.closest(".softlin-explorer") || img.closest("a")) return;
      img.classList.add("softlin-zoomable");
      img.setAttribute("tabindex", "0");
      img.setAttribute("title", "Open the figure at full size");
      img.addEventListener("click", function () { overlay(img); });
      img.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); overlay(img); }
      });
    });
  }

  function fitOutputs() {
    // Printed outputs (tables of numbers): a smaller font first, then wrapped lines.
    document.querySelectorAll("main .cell_output pre").forEach(function (pre) {
      pre.style.fontSize = "";
      pre.classList.remove("softlin-wrapped");
      var room = pre.clientWidth, need = pre.scrollWidth;
      if (room > 0 && need > room + 1) {
        // a table (columns aligned by runs of spaces) may shrink further, and scrolls sideways
        // in its own box if even that is not enough (a phone): wrapping would break its columns
        var tabular = /\S {2,}\S/.test(pre.textContent);
        var floor = tabular ? 0.6 : 0.75, scale = 1;
        for (var i = 0; i < 4 && scale > floor && pre.scrollWidth > pre.clientWidth + 1; i++) {
          // the width is not exactly proportional to the font size (padding, rounding): iterate
          scale = Math.max(floor, scale * (pre.clientWidth - 4) / pre.scrollWidth);
          pre.style.fontSize = (100 * scale).toFixed(1) + "%";
        }
        // still too wide: wrap, except a table on a phone-sized screen, which scrolls
        var scrolls = tabular && window.innerWidth < 700;
        if (!scrolls && pre.scrollWidth > pre.clientWidth + 1) pre.classList.add("softlin-wrapped");
      }
    });
  }

  function fitEquations() {
    document.querySelectorAll("main mjx-container[display='true']").forEach(function (eq) {
      eq.style.fontSize = "";
      var room = eq.clientWidth, need = eq.scrollWidth;
      if (room > 0 && need > room + 1) {
        var scale = Math.max(0.7, (room - 2) / need);
        eq.style.fontSize = (100 * scale).toFixed(1) + "%";
      }
    });
  }

  // Anything that scrolls sideways in its own box gets the class softlin-scrolls, and
  // softlin-more-left / softlin-more-right while there is more to see on that side (book_site.css
  // fades the content out at that edge).
  var SCROLLERS = "main span.math, main div.math, main mjx-container[display='true'], " +
    "main .cell_output pre, main table, main div.highlight pre";

  function edges(el) {
    var left = el.scrollLeft > 1, right = el.scrollLeft + el.clientWidth < el.scrollWidth - 1;
    el.classList.toggle("softlin-more-left", left);
    el.classList.toggle("softlin-more-right", right);
  }

  function onScroll(event) { edges(event.currentTarget); }

  function markScrollers() {
    document.querySelectorAll(".softlin-scrolls").forEach(function (el) {
      el.classList.remove("softlin-scrolls", "softlin-more-left", "softlin-more-right");
      el.removeEventListener("scroll", onScroll);
    });
    document.querySelectorAll(SCROLLERS).forEach(function (el) {
      // a formula's extent is its rendering (mjx-math): MathJax's hidden MathML for screen readers
      // and the glyphs' italic overhang widen scrollWidth by a few pixels without anything to see
      var math = el.matches("span.math, div.math, mjx-container") ? el.querySelector("mjx-math") : null;
      var wide = math ? math.getBoundingClientRect().width > el.clientWidth + 1
                      : el.scrollWidth > el.clientWidth + 1;
      if (!wide || !el.offsetParent) return;
      if (math && el.matches("div.math")) return;  // its mjx-container scrolls, not the wrapper
      var overflow = getComputedStyle(el).overflowX;
      if (!math && overflow !== "auto" && overflow !== "scroll") return;  // wraps or is cut on purpose
      el.classList.add("softlin-scrolls");  // overflow-x: auto and the edge fades (book_site.css)
      el.addEventListener("scroll", onScroll, {passive: true});
      edges(el);
    });
  }

  // Printed tables (a handout, or a reader's own print): no column wraps. A text output whose columns
  // are aligned by spaces, or a table a cell printed, that is wider than the printed column gets a smaller font
  // (down to 50 %); window.softlinFitPrint is also called by tools/handouts.py.
  function fitPrint() {
    document.querySelectorAll(".softlin-print-table").forEach(function (el) {
      el.classList.remove("softlin-print-table");
      el.style.fontSize = el.dataset.softlinFont || "";
      delete el.dataset.softlinFont;
    });
    if (!window.matchMedia("print").matches) { fitOutputs(); return; }
    document.querySelectorAll("main .cell_output pre, main .cell_output table").forEach(function (el) {
      var tabular = el.tagName === "TABLE" || /\S {2,}\S/.test(el.textContent);
      if (!tabular || !el.offsetParent) return;
      el.dataset.softlinFont = el.style.fontSize;
      el.classList.add("softlin-print-table");  // one line per row, nothing hidden (book_site.css)
      var room = el.parentElement.clientWidth;
      var size = parseFloat(getComputedStyle(el).fontSize), floor = size * 0.5;
      for (var i = 0; i < 6 && el.scrollWidth > room + 1 && size > floor; i++) {
        size = Math.max(floor, size * (room - 2) / el.scrollWidth);
        el.style.fontSize = size.toFixed(2) + "px";
      }
    });
  }
  window.softlinFitPrint = fitPrint;

  function fnv1a(text) {  // softlin.book.widgets._fnv1a, on ASCII text
    var h = 0x811c9dc5;
    for (var i = 0; i < text.length; i++) {
      h = Math.imul((h ^ text.charCodeAt(i)) >>> 0, 0x01000193) >>> 0;
    }
    return h.toString(16);
  }

  function answerBoxes() {
    // a check whose answer is a function has no box: on the site, say where it runs
    document.querySelectorAll(".softlin-no-answer:not(.softlin-answer-box)").forEach(function (note) {
      note.textContent = "This check needs a kernel: replace None by your answer and run the cell " +
        "in Colab or Jupyter.";
    });
    document.querySelectorAll(".softlin-answer-box").forEach(function (note) {
      var d = note.dataset, size = parseInt(d.size, 10), q = parseInt(d.q, 10);
      var form = document.createElement("form");
      form.className = "softlin-answer-form";
      var label = document.createElement("label");
      // a function answer's box asks for the one value its exercise names (data-what: "C(0.5)")
      label.textContent = (d.what ? "Your value of " + d.what + " (the function itself needs a kernel)" : "Your answer") + (size === 1 ? "" : " (" + size + " numbers, separated by commas)") + ", to " + d.digits + " significant digits" + (size === 1 ? "" : " of the largest, each rounded at that decimal") + ": ";
      var input = document.createElement("input");
      input.type = "text";
      input.inputMode = "decimal";
      input.autocomplete = "off";
      input.setAttribute("aria-label", "Answer to " + d.label);
      var button = document.createElement("button");
      button.type = "submit";
      button.textContent = "Check";
      var verdict = document.createElement("span");
      verdict.className = "softlin-answer-verdict";
      verdict.setAttribute("role", "status");
      label.appendChild(input);
      form.appendChild(label);
      form.appendChild(button);
      form.appendChild(verdict);
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        // a vector as "(1.5, -2.5)" or "[1.5, -2.5]", the solutions' styles; a typographic minus too
        var typed = input.value.replace(/[()\[\]]/g, " ").replace(/\u2212/g, "-").trim();
        var parts = typed.split(/[\s,;]+/).filter(function (s) { return s; });
        // a fraction, "5/3" or "-1/8", is its value
        var numbers = parts.map(function (s) {
          var f = s.match(/^([-+]?[\d.]+(?:e[-+]?\d+)?)\/([\d.]+(?:e[-+]?\d+)?)$/i);
          return f ? Number(f[1]) / Number(f[2]) : Number(s);
        });
        if (parts.length !== size || numbers.some(function (x) { return !isFinite(x); })) {
          verdict.textContent = "Type " + size + (size === 1 ? " number" : " numbers") +
            " (for example 0.125, 1/8 or 1.5e-3).";
          verdict.className = "softlin-answer-verdict softlin-answer-no";
          return;
        }
        // the typed numbers, rounded at unit 10^qq, hash to h under tag (softlin.book.widgets._rounded_hash)
        function rounds(tag, qq, h) {
          var ints = numbers.map(function (x) { return Math.floor(x / Math.pow(10, qq) + 0.5); });
          return fnv1a(d.label + ":" + tag + ints.join(",")) === h;
        }
        var right = rounds("", q, d.hash);
        var said = "that does not round to the answer at " + d.digits + " significant digits";
        // what the notebook's check would say where a hash can tell: a slip (sign, factor 2) ...
        var slipWords = {"sign:": "the wrong sign (its size is right)",
          "twice:": "twice the expected value (a factor 2 lost or added somewhere?)",
          "half:": "half the expected value (a factor 2 lost or added somewhere?)"};
        var slipped = (d.slips ? d.slips.split(";") : []).some(function (s) {
          var f = s.split(" ");
          if (!right && rounds(f[0], parseInt(f[1], 10), f[2])) {
            said = "your answer " + (f[0] === "sign:" ? "has " : "is ") + slipWords[f[0]];
            return true;
          }
          return false;
        });
        // ... or right to one significant digit fewer than asked (near: "q hash" at k = digits - 1)
        if (!right && !slipped) {
          (d.near ? d.near.split(";") : []).some(function (s, i) {
            var f = s.split(" "), k = parseInt(d.digits, 10) - 1 - i;
            if (rounds("near" + k + ":", parseInt(f[0], 10), f[1])) {
              said = "close: that agrees with the answer to " + k + " significant digit" + (k === 1 ? "" : "s") +
                " but not to " + d.digits + " (a slip in the last digit, or a small term missing?)";
              return true;
            }
            return false;
          });
        }
        verdict.textContent = right ? "Correct (to " + d.digits + " significant digits)." :
          "Not yet: " + said + "." + (d.hint ? " " + d.hint : "");
        verdict.className = "softlin-answer-verdict " + (right ? "softlin-answer-yes" : "softlin-answer-no");
      });
      note.textContent = "Type your answer in the box below and press Check (in Colab or Jupyter: " +
        "replace None by your answer and run the cell).";
      note.insertAdjacentElement("afterend", form);
    });
  }

  function whenTypeset(callback) {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise.then(callback);
    } else {
      setTimeout(function () { whenTypeset(callback); }, 200);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    solutionTitles();
    answerBoxes();
    figures();
    fitOutputs();
    markScrollers();
    whenTypeset(function () { fitEquations(); markScrollers(); });
    var timer;
    window.addEventListener("resize", function () {
      // printing lays the page out at the paper's width (a resize): the print fit is fitPrint's, and
      // a change of layout here would move what tools/handouts.py measured
      if (window.matchMedia("print").matches) return;
      clearTimeout(timer);
      timer = setTimeout(function () { fitOutputs(); fitEquations(); markScrollers(); }, 150);
    });
    window.addEventListener("beforeprint", fitPrint);
    window.addEventListener("afterprint", fitPrint);
  });
})();
