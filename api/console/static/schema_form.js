// A form generated from a JSON Schema (a request's `answer_schema`), and the validator that
// refuses an invalid answer before it is sent. Supported: objects (properties, required),
// strings (enum, minLength, maxLength, pattern, format email/date), numbers and integers
// (minimum, maximum, exclusiveMinimum, exclusiveMaximum), booleans, arrays of those scalars
// (minItems, maxItems, uniqueItems). Anything else is edited as JSON text.

import { h, humanize } from "./dom.js";

let formCount = 0;

export function validate(schema, value, path = "") {
  const errors = [];
  const at = path || "answer";
  const fail = (message) => errors.push({ path: at, message });
  if (value === undefined) return errors;
  const type = schema.type;
  if (schema.enum && !schema.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))) {
    fail(`must be one of ${schema.enum.map(String).join(", ")}`);
  } else if (type === "object") {
    if (!value || typeof value !== "object" || Array.isArray(value)) return [{ path: at, message: "must be an object" }];
    for (const name of schema.required || []) {
      if (value[name] === undefined) errors.push({ path: join(path, name), message: "is required" });
    }
    for (const [name, child] of Object.entries(schema.properties || {})) {
      errors.push(...validate(child, value[name], join(path, name)));
    }
  } else if (type === "string") {
    if (typeof value !== "string") fail("must be text");
    else {
      if (schema.minLength !== undefined && value.length < schema.minLength) fail(`must be at least ${schema.minLength} characters`);
      if (schema.maxLength !== undefined && value.length > schema.maxLength) fail(`must be at most ${schema.maxLength} characters`);
      if (schema.pattern !== undefined && !new RegExp(schema.pattern, "u").test(value)) fail(`must match the pattern ${schema.pattern}`);
      if (schema.format === "email" && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(value)) fail("must be an email address");
      if (schema.format === "date" && !/^\d{4}-\d{2}-\d{2}$/.test(value)) fail("must be a date (YYYY-MM-DD)");
    }
  } else if (type === "integer" || type === "number") {
    if (typeof value !== "number" || !Number.isFinite(value)) fail("must be a number");
    else if (type === "integer" && !Number.isInteger(value)) fail("must be a whole number");
    else {
      if (schema.minimum !== undefined && value < schema.minimum) fail(`must be at least ${schema.minimum}`);
      if (schema.maximum !== undefined && value > schema.maximum) fail(`must be at most ${schema.maximum}`);
      if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) fail(`must be more than ${schema.exclusiveMinimum}`);
      if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) fail(`must be less than ${schema.exclusiveMaximum}`);
    }
  } else if (type === "boolean") {
    if (typeof value !== "boolean") fail("must be yes or no");
  } else if (type === "array") {
    if (!Array.isArray(value)) return [{ path: at, message: "must be a list" }];
    if (schema.minItems !== undefined && value.length < schema.minItems) fail(`needs at least ${schema.minItems} entries`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) fail(`takes at most ${schema.maxItems} entries`);
    if (schema.uniqueItems && new Set(value.map((v) => JSON.stringify(v))).size !== value.length) fail("must not repeat an entry");
    value.forEach((item, i) => errors.push(...validate(schema.items || {}, item, `${at}[${i}]`)));
  }
  return errors;
}

function join(path, name) {
  return path ? `${path}.${name}` : name;
}

// -- fields: each returns { element, read() -> { value, error } } --------------------------

function scalarInput(schema, id, required) {
  const type = schema.type;
  if (schema.enum) {
    return h("select", { id, required },
      h("option", { value: "" }, required ? "Choose…" : "(none)"),
      schema.enum.map((v) => h("option", { value: JSON.stringify(v) }, String(v))));
  }
  if (type === "boolean") return h("input", { id, type: "checkbox" });
  if (type === "integer" || type === "number") {
    return h("input", { id, type: "text", inputmode: type === "integer" ? "numeric" : "decimal",
                        autocomplete: "off" });
  }
  if (type === "string" && schema.maxLength > 200) {
    return h("textarea", { id, rows: 3 });
  }
  return h("input", { id, type: schema.format === "email" ? "email" : "text", autocomplete: "off" });
}

function parseScalar(schema, text) {
  if (schema.enum) return text === "" ? undefined : { value: JSON.parse(text) };
  if (text === "") return undefined;
  if (schema.type === "integer" || schema.type === "number") {
    const number = Number(text.trim());
    return Number.isNaN(number) ? { error: "must be a number" } : { value: number };
  }
  return { value: text };
}

// Shows `initial` (the document offered for editing) in a field's control.
function fill(control, schema, initial) {
  if (initial === undefined || initial === null) return;
  if (schema.type === "boolean" && !schema.enum) control.checked = Boolean(initial);
  else if (schema.enum) control.value = JSON.stringify(initial);
  else if (schema.type === "array" && Array.isArray(initial)) control.value = initial.join("\n");
  else if (typeof initial === "object") control.value = JSON.stringify(initial, null, 2);
  else control.value = String(initial);
}

function field(schema, name, path, required, initial) {
  const id = `f${formCount}-${path.replace(/[^A-Za-z0-9_-]/g, "_") || "answer"}`;
  const label = schema.title || humanize(name || "answer");
  const hint = schema.description ? h("p", { class: "hint", id: `${id}-hint` }, schema.description) : null;
  const errorBox = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
  let control;
  let read;
  if (schema.type === "object") {
    const children = orderedProperties(schema).map(([child, sub]) =>
      field(sub, child, join(path, child), (schema.required || []).includes(child),
            initial && typeof initial === "object" ? initial[child] : undefined));
    const element = h("fieldset", { class: "schema-object" },
      h("legend", {}, label), hint, children.map((c) => c.element));
    return {
      element, children, path,
      read() {
        const value = {};
        for (const c of children) {
          const got = c.read();
          if (got && got.error) return got;
          if (got && got.value !== undefined) value[c.name] = got.value;
        }
        return { value };
      },
      name, showError: () => {},
    };
  }
  if (schema.type === "array") {
    control = h("textarea", { id, rows: 3 });
    const itemSchema = schema.items || { type: "string" };
    read = () => {
      const lines = control.value.split("\n").map((l) => l.trim()).filter((l) => l !== "");
      const values = [];
      for (const line of lines) {
        const got = parseScalar(itemSchema, line);
        if (got && got.error) return got;
        values.push(got.value);
      }
      return { value: lines.length || required ? values : undefined };
    };
  } else if (["string", "integer", "number", "boolean"].includes(schema.type) || schema.enum) {
    control = scalarInput(schema, id, required);
    read = () => (schema.type === "boolean" && !schema.enum
      ? { value: control.checked }
      : parseScalar(schema, control.value));
  } else {
    control = h("textarea", { id, rows: 4, class: "mono" });
    read = () => {
      if (control.value.trim() === "") return undefined;
      try {
        return { value: JSON.parse(control.value) };
      } catch {
        return { error: "must be valid JSON" };
      }
    };
  }
  fill(control, schema, initial);
  const describedBy = [hint && `${id}-hint`, `${id}-error`].filter(Boolean).join(" ");
  control.setAttribute("aria-describedby", describedBy);
  if (required) control.setAttribute("aria-required", "true");
  const listHint = schema.type === "array" ? h("span", { class: "hint" }, " (one per line)") : null;
  const labelEl = h("label", { for: id }, label, required ? h("span", { class: "req" }, " *") : null, listHint);
  const element = h("div", { class: schema.type === "boolean" ? "field field-check" : "field" },
    schema.type === "boolean" ? [control, labelEl] : [labelEl, control], hint, errorBox);
  return {
    element, path, name,
    read() {
      const got = read();
      if (got && got.error) return { error: got.error, path };
      return got || { value: undefined };
    },
    showError(message) {
      errorBox.hidden = !message;
      errorBox.textContent = message ? `${label} ${message}.` : "";
      if (message) control.setAttribute("aria-invalid", "true");
      else control.removeAttribute("aria-invalid");
    },
  };
}

// A request's context is stored as JSONB, which does not keep the order of an object's keys:
// required fields come first in the order `required` lists them, then the others by name.
function orderedProperties(schema) {
  const required = schema.required || [];
  const entries = Object.entries(schema.properties || {});
  const rank = (name) => (required.includes(name) ? required.indexOf(name) : required.length);
  return entries.sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
}

function allFields(f) {
  return f.children ? f.children.flatMap(allFields) : [f];
}

// The form for `schema`, showing `initial`: `check()` returns { ok, value, errors } and marks
// each invalid field.
export function schemaForm(schema, initial) {
  formCount += 1;
  const root = field(schema, schema.title ? "" : "answer", "", true, initial);
  const fields = allFields(root);
  const summary = h("div", { class: "form-errors", role: "alert", hidden: true });
  const element = h("div", { class: "schema-form" }, root.element, summary);
  return {
    element,
    check() {
      fields.forEach((f) => f.showError(""));
      const got = root.read();
      let errors = got.error ? [{ path: got.path || "answer", message: got.error }]
        : validate(schema, got.value);
      if (got.value === undefined && !got.error) errors = [{ path: "answer", message: "is required" }];
      for (const error of errors) {
        const target = fields.find((f) => f.path === error.path) ||
          fields.find((f) => error.path.startsWith(f.path) && f.path) || fields[0];
        target.showError(error.message);
      }
      summary.hidden = errors.length === 0;
      summary.textContent = errors.length
        ? `The answer is not valid: ${errors.map((e) => `${e.path} ${e.message}`).join("; ")}.`
        : "";
      return { ok: errors.length === 0, value: got.value, errors };
    },
  };
}
