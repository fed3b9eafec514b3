// The parts of CodeMirror 6 the configuration editor (webapp/static/editor.js) uses,
// bundled into one file that sets `window.AgentwatchCodeMirror`. Only this entry and the
// pinned package-lock.json decide what goes in; build.sh makes the file.
import { EditorState, Compartment } from "@codemirror/state";
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  highlightSpecialChars, drawSelection, rectangularSelection, crosshairCursor,
} from "@codemirror/view";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import {
  syntaxHighlighting, indentOnInput, bracketMatching, foldGutter, foldKeymap,
} from "@codemirror/language";
import { classHighlighter } from "@lezer/highlight";
import { searchKeymap, highlightSelectionMatches } from "@codemirror/search";
import { lintGutter, linter, setDiagnostics, forceLinting, lintKeymap } from "@codemirror/lint";
import { autocompletion, completionKeymap } from "@codemirror/autocomplete";
import { yaml } from "@codemirror/lang-yaml";
import { MergeView } from "@codemirror/merge";

window.AgentwatchCodeMirror = Object.freeze({
  EditorState, Compartment,
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  highlightSpecialChars, drawSelection, rectangularSelection, crosshairCursor,
  defaultKeymap, history, historyKeymap, indentWithTab,
  syntaxHighlighting, indentOnInput, bracketMatching, foldGutter, foldKeymap,
  classHighlighter,
  searchKeymap, highlightSelectionMatches,
  lintGutter, linter, setDiagnostics, forceLinting, lintKeymap,
  autocompletion, completionKeymap,
  yaml,
  MergeView,
});
