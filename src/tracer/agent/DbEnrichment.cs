// Database client Activities (a library's own ActivitySource: Npgsql, MySqlConnector, or a
// bytecode integration's): their attributes completed to the current database semantic
// conventions where the library left them out, never twice (a tag already there stays, but
// for db.query.text and db.statement, whose literals are replaced by `?` unless
// sanitize_queries = false), the span named `{db.operation.name} {db.collection.name}`, and a
// failure the library did not mark (a DbException thrown while its Activity is current) an
// ERROR with error.type.
using System;
using System.Diagnostics;
using System.Text;

namespace Clrmux.Agent
{
    internal static class DbEnrichment
    {
        internal static bool Sanitize = true;
        private static int s_watching;

        /// <summary>Watches first-chance exceptions once a database Activity exists.</summary>
        internal static void Watch()
        {
            if (System.Threading.Interlocked.Exchange(ref s_watching, 1) != 0)
                return;
            AppDomain.CurrentDomain.FirstChanceException += (_, e) =>
            {
                try
                {
                    if (e.Exception is System.Data.Common.DbException ex && Activity.Current is { } a &&
                        a.Kind == ActivityKind.Client && IsDb(a) && a.IsAllDataRequested)
                        Enrichment.AddException(a, ex);
                }
                catch
                {
                    // an attribute less: the app runs on
                }
            };
        }

        internal static bool IsDb(Activity a) => a.GetTagItem("db.system.name") != null || a.GetTagItem("db.system") != null;

        // the old conventions' db.system values whose stable name differs
        private static string SystemName(string s) => s switch
        {
            "mssql" => "microsoft.sql_server",
            "oracle" => "oracle.db",
            "db2" => "ibm.db2",
            _ => s,
        };

        internal static void Complete(Activity a, ref Enrichment.Completed c)
        {
            if (a.GetTagItem("db.system") is string sys)
                Enrichment.Fill(a, "db.system.name", SystemName(sys));
            Enrichment.Fill(a, "db.namespace", a.GetTagItem("db.name"));
            string? query = a.GetTagItem("db.query.text") as string;
            string? text = query ?? a.GetTagItem("db.statement") as string;
            if (text != null)
            {
                Statement st = StatementOf(text);
                if (Sanitize)
                {
                    if (query == null || !ReferenceEquals(st.Clean, text)) // nothing to change: no SetTag
                        a.SetTag("db.query.text", st.Clean);
                    if (a.GetTagItem("db.statement") != null)
                        a.SetTag("db.statement", st.Clean);
                }
                else
                {
                    Enrichment.Fill(a, "db.query.text", text);
                }
                Enrichment.Fill(a, "db.operation.name", st.Op);
                Enrichment.Fill(a, "db.collection.name", st.Table);
            }
            Enrichment.Fill(a, "server.address", a.GetTagItem("net.peer.name") ?? a.GetTagItem("net.peer.ip"));
            if (a.GetTagItem("server.port") == null && a.GetTagItem("net.peer.port") is { } port &&
                int.TryParse(port.ToString(), out int p))
                a.SetTag("server.port", p);
            if (a.GetTagItem("db.operation.name") is string o)
                c.Name = a.GetTagItem("db.collection.name") is string t ? o + " " + t : o;
            if (a.Status == ActivityStatusCode.Error)
                Enrichment.Fill(a, "error.type", a.GetTagItem("db.response.status_code") ?? "_OTHER");
            else if (a.GetTagItem("error.type") is string err)
            {
                c.Error = true;
                c.ErrorMessage = err;
            }
        }

        /// <summary>A statement's sanitized text (its own text with sanitize_queries = false; the
        /// same string when sanitizing changes nothing) and summary.</summary>
        internal sealed class Statement
        {
            public readonly string Clean;
            public readonly string? Op, Table;
            public Statement(string clean, string? op, string? table)
            {
                Clean = clean;
                Op = op;
                Table = table;
            }
        }

        // the statements seen, by text: a service runs the same few again and again (sanitizing
        // and summarizing each call's text cost more than the rest of its span's recording)
        private static readonly System.Collections.Concurrent.ConcurrentDictionary<string, Statement> s_statements =
            new(StringComparer.Ordinal);

        internal static Statement StatementOf(string text)
        {
            if (s_statements.TryGetValue(text, out Statement? st))
                return st;
            (string? op, string? table) = Summary(text);
            string clean = Sanitize ? SanitizeSql(text) : text;
            st = new Statement(clean == text ? text : clean, op, table);
            if (s_statements.Count < 4096) // statements with their literals in them: not all kept
                s_statements[text] = st;
            return st;
        }

        /// <summary>The statement's operation (its first keyword, upper case) and, for a simple
        /// one, its table; (null, null) for several statements or none.</summary>
        internal static (string?, string?) Summary(string sql)
        {
            string s = sql.Trim().TrimEnd(';');
            if (s.Length == 0 || s.Contains(';'))
                return (null, null);
            string[] w = s.Split((char[]?)null, 12, StringSplitOptions.RemoveEmptyEntries);
            string op = w[0].ToUpperInvariant();
            if (op.Length > 16 || !IsWord(op))
                return (null, null);
            string? after = op switch
            {
                "SELECT" or "DELETE" => "FROM",
                "INSERT" or "REPLACE" => "INTO",
                "UPDATE" => "UPDATE",
                "CREATE" or "DROP" or "ALTER" or "TRUNCATE" => "TABLE",
                _ => null,
            };
            string? table = null;
            for (int i = 0; after != null && i < w.Length - 1; i++)
            {
                if (!w[i].Equals(after, StringComparison.OrdinalIgnoreCase))
                    continue;
                int j = i + 1;
                // CREATE TABLE IF NOT EXISTS t, DROP TABLE IF EXISTS t
                while (j < w.Length && (w[j].Equals("IF", StringComparison.OrdinalIgnoreCase) ||
                                        w[j].Equals("NOT", StringComparison.OrdinalIgnoreCase) ||
                                        w[j].Equals("EXISTS", StringComparison.OrdinalIgnoreCase)))
                    j++;
                if (j < w.Length)
                {
                    string t = w[j];
                    int paren = t.IndexOf('(');
                    if (paren >= 0)
                        t = t.Substring(0, paren);
                    t = t.Trim('"', '`', '[', ']');
                    if (t.Length != 0 && t.Length <= 64 && IsName(t))
                        table = t;
                }
                break;
            }
            return (op, table);
        }

        private static bool IsWord(string s)
        {
            foreach (char ch in s)
                if (ch < 'A' || ch > 'Z')
                    return false;
            return true;
        }

        private static bool IsName(string s)
        {
            foreach (char ch in s)
                if (!char.IsLetterOrDigit(ch) && ch != '_' && ch != '.' && ch != '$')
                    return false;
            return true;
        }

        /// <summary>The statement with its literals replaced by `?`: quoted strings ('...', with
        /// '' and backslash escapes), numbers not part of a name, hex (0x..), dollar-quoted
        /// strings ($$...$$, $tag$...$tag$); comments removed.</summary>
        internal static string SanitizeSql(string sql)
        {
            var b = new StringBuilder(sql.Length);
            int i = 0, n = sql.Length;
            while (i < n)
            {
                char ch = sql[i];
                if (ch == '\'')
                {
                    i++;
                    while (i < n)
                    {
                        if (sql[i] == '\\' && i + 1 < n) { i += 2; continue; }
                        if (sql[i] == '\'') { if (i + 1 < n && sql[i + 1] == '\'') { i += 2; continue; } i++; break; }
                        i++;
                    }
                    b.Append('?');
                }
                else if (ch == '-' && i + 1 < n && sql[i + 1] == '-')
                {
                    while (i < n && sql[i] != '\n')
                        i++;
                }
                else if (ch == '/' && i + 1 < n && sql[i + 1] == '*')
                {
                    int end = sql.IndexOf("*/", i + 2, StringComparison.Ordinal);
                    i = end < 0 ? n : end + 2;
                }
                else if (ch == '$' && (i == 0 || !IsNameChar(sql[i - 1])) && DollarTag(sql, i) is int tagLen)
                {
                    string tag = sql.Substring(i, tagLen);
                    int end = sql.IndexOf(tag, i + tagLen, StringComparison.Ordinal);
                    i = end < 0 ? n : end + tagLen;
                    b.Append('?');
                }
                else if (char.IsDigit(ch) && (i == 0 || !IsNameChar(sql[i - 1])))
                {
                    if (ch == '0' && i + 1 < n && (sql[i + 1] == 'x' || sql[i + 1] == 'X'))
                        i += 2;
                    while (i < n && (char.IsLetterOrDigit(sql[i]) || sql[i] == '.'))
                        i++;
                    b.Append('?');
                }
                else if (IsNameChar(ch))
                {
                    while (i < n && IsNameChar(sql[i]))
                        b.Append(sql[i++]);
                }
                else
                {
                    b.Append(ch);
                    i++;
                }
            }
            return b.ToString();
        }

        private static bool IsNameChar(char c) => char.IsLetterOrDigit(c) || c == '_' || c == '$' || c == '@' || c == '"' || c == '`';

        // $$ or $tag$ at i: its length, else null
        private static int? DollarTag(string s, int i)
        {
            int j = i + 1;
            while (j < s.Length && (char.IsLetterOrDigit(s[j]) || s[j] == '_'))
                j++;
            return j < s.Length && s[j] == '$' && (j == i + 1 || !char.IsDigit(s[i + 1])) ? j - i + 1 : null;
        }
    }
}
