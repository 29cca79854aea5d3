/* softlin book: the precomputed explorers of softlin.book.widgets.explorer move on the static page.
 *
 * When the book is built, each explorer draws every combination of its controls' values with the chapter's
 * own plotting function and writes them into the page: a <div class="softlin-explorer"> holding the
 * controls (range inputs and selects, one per control, in the order of the call), the picture of the
 * default state, and a JSON block with the other pictures (data: URIs, in C order: the last control varies
 * fastest). This script only swaps pictures: no kernel, no network, no widget manager. The JSON is parsed
 * at the first move (lazy). Before printing, every explorer goes back to its default picture.
 */
(function () {
  'use strict';

  function setup(root) {
    var img = root.querySelector('img.softlin-explorer-frame');
    var dataEl = root.querySelector('script.softlin-explorer-data');
    var inputs = Array.prototype.slice.call(root.querySelectorAll('[data-control]'));
    if (!img || !dataEl || !inputs.length) { return; }
    inputs.sort(function (a, b) { return a.dataset.control - b.dataset.control; });
    var defaultSrc = img.getAttribute('src');
    var data = null;

    function load() {
      if (data === null) { data = JSON.parse(dataEl.textContent); }
      return data;
    }

    function show(state) {
      var d = load();
      var flat = 0;
      for (var k = 0; k < state.length; k++) { flat = flat * d.shape[k] + state[k]; }
      var parts = [];
      inputs.forEach(function (el, k) {
        var label = d.labels[k][state[k]];
        parts.push(d.names[k] + ' = ' + label);
        if (el.tagName === 'INPUT') {
          el.value = String(state[k]);
          el.setAttribute('aria-valuetext', label);
          var out = root.querySelector('output[for="' + el.id + '"]');
          if (out) { out.textContent = label; }
        } else {
          el.value = String(state[k]);
        }
      });
      img.src = d.frames[flat] || defaultSrc;  // null marks the default picture, kept in the <img>
      img.dataset.frame = String(flat);
      img.alt = 'Explorer picture at ' + parts.join(', ') + ' (one of ' + d.frames.length +
        ' pictures drawn when the book was built; move the controls to see the others)';
    }

    function current() {
      return inputs.map(function (el) { return parseInt(el.value, 10); });
    }

    inputs.forEach(function (el) {
      el.addEventListener('input', function () { show(current()); });
      el.addEventListener('change', function () { show(current()); });
    });
    var saved = null;
    window.addEventListener('beforeprint', function () { saved = current(); show(load().default); });
    window.addEventListener('afterprint', function () { if (saved) { show(saved); saved = null; } });
    root.classList.add('softlin-explorer-ready');
  }

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll('.softlin-explorer'), setup);
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
