/*
 * The search and translator tabs (a WAI-ARIA tablist: arrows, Home and End move between
 * them); the open tab is part of the address (?tab=translate).
 */

import { byId } from "./dom.js";

/** The open tab ("search", "translate"): the id of its tab button without "tab-". */
export function selectTab(name, focus) {
  const tabs = Array.from(document.querySelectorAll("[role=tab]"));
  const tab = byId("tab-" + name) || tabs[0];
  for (const t of tabs) {
    const selected = t === tab;
    t.setAttribute("aria-selected", selected ? "true" : "false");
    t.tabIndex = selected ? 0 : -1;
    byId(t.getAttribute("aria-controls")).hidden = !selected;
  }
  if (focus) tab.focus();
}

export function setupTabs() {
  const tabs = Array.from(document.querySelectorAll("[role=tab]"));
  function select(tab, focus) {
    selectTab(tab.id.replace(/^tab-/, ""), focus);
    // the open tab is part of the address (a reload or a shared link opens it again)
    const params = new URLSearchParams(window.location.search);
    if (tab.id === "tab-search") params.delete("tab");
    else params.set("tab", tab.id.replace(/^tab-/, ""));
    const query = params.toString() ? "?" + params.toString() : window.location.pathname;
    window.history.replaceState(null, "", query + window.location.hash);
  }
  for (const tab of tabs) {
    tab.addEventListener("click", function () { select(tab, true); });
    tab.addEventListener("keydown", function (event) {
      const at = tabs.indexOf(tab);
      let next = null;
      if (event.key === "ArrowRight" || event.key === "ArrowDown") next = tabs[(at + 1) % tabs.length];
      else if (event.key === "ArrowLeft" || event.key === "ArrowUp") next = tabs[(at - 1 + tabs.length) % tabs.length];
      else if (event.key === "Home") next = tabs[0];
      else if (event.key === "End") next = tabs[tabs.length - 1];
      if (next) {
        event.preventDefault();
        select(next, true);
      }
    });
  }
}
