// Activity recording (to come in the next step).
namespace Clrmux.Agent
{
    internal static class Activities
    {
        public static void Start()
        {
        }
    }
}
